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
    ///
    /// With `peakRSS`, the child's peak RSS is its own: `ru_maxrss` from
    /// wait4 also counts this process's peak, because `posix_spawn` starts the
    /// child on this process's memory and Linux records that memory's
    /// high-water mark when the child execs. So the child's `VmHWM` (its own
    /// memory's high-water mark) is read from /proc every 2 ms while it runs;
    /// the time is then only as exact as that. Without `peakRSS` the figure is
    /// wait4's, an upper bound.
    static func measure(_ executable: String, _ arguments: [String], requireSuccess: Bool = true, capture: Bool = false, peakRSS: Bool = false) throws -> Measurement {
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
        var highWater: Int?
        if peakRSS {
            while wait4(pid, &status, WNOHANG, &usage) == 0 {
                if let kilobytes = ownHighWaterKilobytes(of: pid) { highWater = max(highWater ?? 0, kilobytes) }
                usleep(2_000)
            }
        } else {
            _ = wait4(pid, &status, 0, &usage)
        }
        let seconds = (ContinuousClock.now - start).seconds
        guard status == 0 || !requireSuccess else { throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable) \(arguments) exited with \(status)"]) }
        let output = capture ? ((try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? "") : ""
        return Measurement(seconds: seconds, peakRSSKilobytes: highWater ?? Int(usage.ru_maxrss), output: output)
    }

    /// `VmHWM` of a running process, in kilobytes: the high-water mark of its
    /// own memory since it exec'd. `nil` once it has exited (or off Linux).
    static func ownHighWaterKilobytes(of pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            // "VmHWM:\t   58660 kB"
            return Int(line.dropFirst(6).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
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
            syncs.append(try measure(nerdfeed, ["--once", "--feed", "\(base)/forum/rss?limit=10000", "--songs", base, "--cache", cache], peakRSS: true))
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
        SummaryRow.print([
            SummaryRow("nerdfeed: sync of a 10,000-item feed into an empty cache", target: "peak RSS < 100 MB",
                       String(format: "%d MB; %.2f s (best of %d)", rss / 1024, sync.seconds, syncs.count), met: rss / 1024 < 100),
            SummaryRow("nerdfeed: cold offline start, 1,000 cached items, vs `sqlite3`", target: "≤ 3×",
                       String(format: "%@ (%.1f vs %.1f ms)", SummaryRow.times(d / s), d * 1e3, s * 1e3), met: d / s <= 3),
        ])
    }
}
