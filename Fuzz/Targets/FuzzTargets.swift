import Foundation

/// One fuzz target: a function that feeds arbitrary bytes to one parser or
/// algorithm of Depot and stops the process when an invariant breaks.
///
/// A target never throws and never returns a verdict: input that the code
/// under test rejects the way it promises (a `DepotError`, a `nil`) is a pass,
/// and anything else ends the process through ``FuzzTargets/fail(_:_:)``, so
/// libFuzzer records the input as a crash.
///
/// For example:
///
/// ```swift
/// let target = FuzzTargets.named("feed-date")!
/// target.run(Data("Tue, 10 Jun 2003 04:00:00 GMT".utf8))
/// ```
package struct FuzzTarget: Sendable {
    /// The name used on the command line, in `DEPOT_FUZZ_TARGET` and as the
    /// folder of its corpus (`Fuzz/Corpus/<name>/`) and crashes (`Fuzz/Crashes/<name>/`).
    package var name: String
    /// What it fuzzes, for `depot-fuzz --list`.
    package var summary: String
    /// Runs one input; returns only if every invariant held.
    package var run: @Sendable (Data) -> Void
    /// Makes what every input shares, before the first: `depot-fuzz` calls it
    /// from libFuzzer's set-up hook, so that LeakSanitizer does not count it
    /// against the first input.
    package var prepare: @Sendable () -> Void = {}
}

/// The fuzz targets and what they share: the lookup by name, the failure that
/// libFuzzer sees, and replaying saved inputs.
///
/// Each target lives in `FuzzTargets+<Target>.swift` and is plain Swift: the
/// same code runs under libFuzzer (`Fuzz/run`), in `depot-fuzz` without the
/// sanitizer, and in `FuzzRegressionTests`.
package enum FuzzTargets {
    /// Every target, in the order `Fuzz/run` runs them.
    package static let all: [FuzzTarget] = [
        FuzzTarget(name: "feed", summary: "FeedParser.parse on an RSS or Atom document", run: feed),
        FuzzTarget(name: "feed-date", summary: "FeedDate.parse on a date as feeds write it", run: feedDate),
        FuzzTarget(name: "top-songs", summary: "TopSongsDocument.songs on a top-songs JSON chart", run: topSongs),
        FuzzTarget(name: "retry-after", summary: "RetryAfter.delay and RetryAfter.httpDate on a Retry-After value", run: retryAfter),
        FuzzTarget(name: "results-diff", summary: "ResultsDiff.changes between two snapshots, replayed", run: resultsDiff),
        FuzzTarget(name: "sse", summary: "ServerSentEventParser on a stream cut into chunks three ways", run: serverSentEvents),
        FuzzTarget(name: "store", summary: "Store on a cache file with bytes overwritten or cut short", run: store, prepare: prepareStore),
        FuzzTarget(name: "stored-value", summary: "ValueFormat.decode on a cached value's stored bytes", run: storedValue),
    ]

    /// The target called `name`, or `nil`.
    package static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }

    /// Ends the process with a message that names the target and the broken
    /// invariant. `fatalError`, not `preconditionFailure`: its message survives `-O`.
    package static func fail(_ target: String, _ message: String) -> Never {
        fatalError("fuzz target \(target): \(message)")
    }

    /// Fails `target` with `message` unless `condition` holds.
    static func check(_ condition: Bool, _ target: String, _ message: @autoclosure () -> String) {
        if !condition { fail(target, message()) }
    }

    /// The input files under `paths`: a file as given, a folder's visible regular
    /// files (not recursively), each sorted by name. A path that does not exist gives nothing.
    package static func inputFiles(in paths: [URL]) -> [URL] {
        let files = FileManager.default
        return paths.flatMap { path -> [URL] in
            var isFolder: ObjCBool = false
            guard files.fileExists(atPath: path.path, isDirectory: &isFolder) else { return [] }
            guard isFolder.boolValue else { return [path] }
            let names = (try? files.contentsOfDirectory(atPath: path.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { path.appending(path: $0) }.filter {
                var isFolder: ObjCBool = false
                return files.fileExists(atPath: $0.path, isDirectory: &isFolder) && !isFolder.boolValue
            }
        }
    }

    /// Runs every file under `paths` through `target`, writing each file's path
    /// to standard error first when `announcing`, so the last line before a crash
    /// names the input. Returns how many inputs ran.
    ///
    /// - Throws: when a file cannot be read.
    @discardableResult
    package static func replay(_ target: FuzzTarget, paths: [URL], announcing: Bool = false) throws -> Int {
        let inputs = inputFiles(in: paths)
        for input in inputs {
            if announcing { FileHandle.standardError.write(Data("\(target.name) \(input.path)\n".utf8)) }
            target.run(try Data(contentsOf: input))
        }
        return inputs.count
    }
}
