#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Nerdfeed's speed as a user sees it, with the release binaries as separate
/// processes: a cold offline start listing 1,000 cached items (against sqlite3
/// listing the same rows), and a sync of a 10,000-item feed (time and peak RSS).
enum NerdfeedBench {
    struct Measurement {
        var seconds: Double
        var peakRSSKilobytes: Int
        /// What it printed, when captured.
        var output = ""
    }

    /// Runs `executable` with `arguments` (output discarded unless `capture`) and measures it with wait4.
    static func measure(_ executable: String, _ arguments: [String], requireSuccess: Bool = true, capture: Bool = false) throws -> Measurement {
        var actions: posix_spawn_file_actions_t = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let outputFile = FileManager.default.temporaryDirectory.appending(path: "measure-\(UUID().uuidString).out").path
        defer { if capture { unlink(outputFile) } }
        if capture {
            posix_spawn_file_actions_addopen(&actions, 1, outputFile, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let start = ContinuousClock.now
        guard posix_spawn(&pid, executable, &actions, nil, argv, environ) == 0 else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: executable])
        }
        var status: Int32 = 0
        var usage = rusage()
        _ = wait4(pid, &status, 0, &usage)
        let seconds = (ContinuousClock.now - start).seconds
        guard status == 0 || !requireSuccess else { throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable) \(arguments) exited with \(status)"]) }
        let output = capture ? ((try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? "") : ""
        return Measurement(seconds: seconds, peakRSSKilobytes: Int(usage.ru_maxrss), output: output)
    }

    static func median(_ values: [Double]) -> Double {
        values.sorted()[values.count / 2]
    }

    static func run(binaries: String, repeats: Int) async throws {
        let nerdfeed = "\(binaries)/nerdfeed"
        let server = "\(binaries)/depot-server"
        let folder = FileManager.default.temporaryDirectory.appending(path: "nerdfeed-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        // A depot-server with 10,000 posts, in its own process.
        let depotServer = try DepotServerProcess.start(server, arguments: ["--port", "0", "--initial-posts", "10000"])
        defer { depotServer.stop() }
        let base = depotServer.base
        say("nerdfeed: release binaries from \(binaries), depot-server at \(base)")

        // Sync of a 10,000-item feed into an empty cache.
        var syncs: [Measurement] = []
        for run in 0..<max(1, repeats) {
            let cache = folder.appending(path: "sync-\(run).sqlite").path
            syncs.append(try measure(nerdfeed, ["--once", "--feed", "\(base)/forum/rss?limit=10000", "--songs", base, "--cache", cache]))
        }
        let sync = syncs.min { $0.seconds < $1.seconds }!
        let rss = syncs.map(\.peakRSSKilobytes).max()!
        let feedBytes = try Data(contentsOf: URL(string: "\(base)/forum/rss?limit=10000")!).count
        say(String(format: "sync of a 10,000-item feed (%.1f MB of RSS) into an empty cache: %.2f s (best of %d), peak RSS %d MB (worst)", Double(feedBytes) / 1e6, sync.seconds, syncs.count, rss / 1024))

        // A cache with 1,000 items, then cold offline starts.
        let cache = folder.appending(path: "cold.sqlite").path
        let feed = "\(base)/forum/rss?limit=1000"
        _ = try measure(nerdfeed, ["--once", "--feed", feed, "--cache", cache])
        var depot: [Double] = []
        var sqlite: [Double] = []
        let query = "SELECT isRead, title, author, published FROM feedItem WHERE feed = '\(feed)' ORDER BY published DESC LIMIT 1000"
        for _ in 0..<max(5, repeats * 5) {
            depot.append(try measure(nerdfeed, ["--once", "--offline", "--limit", "1000", "--feed", feed, "--cache", cache]).seconds)
            sqlite.append(try measure("/usr/bin/sqlite3", [cache, query]).seconds)
        }
        let (d, s) = (median(depot), median(sqlite))
        say(String(format: "cold offline start, 1,000 cached items printed: nerdfeed %.1f ms, sqlite3 %.1f ms (median of %d): %.2fx", d * 1e3, s * 1e3, depot.count, d / s))
    }
}
