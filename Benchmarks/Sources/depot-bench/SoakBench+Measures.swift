import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization

// MARK: - Counting

extension SoakBench {
    /// What every part of the run counts; read by the monitor off the main actor.
    final class Counters: Sendable {
        let enqueued = Atomic<Int>(0)
        let succeeded = Atomic<Int>(0)
        let cancelled = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        /// Completions for a ticket that had already completed, or was never enqueued.
        let duplicates = Atomic<Int>(0)
        let changeSets = Atomic<Int>(0)
        let observationErrors = Atomic<Int>(0)
        let replacedObservers = Atomic<Int>(0)
        /// The most released results controllers seen alive 10 s after their release.
        let lingeringControllers = Atomic<Int>(0)
        let cancelRequests = Atomic<Int>(0)
        let commits = Atomic<Int>(0)
        /// The writer's commits: their total time, and the longest since the monitor last read it, in ns.
        let commitTime = Atomic<Int>(0)
        let longestCommit = Atomic<Int>(0)
        let writerErrors = Atomic<Int>(0)
        /// The longest main-actor delay beyond the frame period since the monitor last read it, in ns.
        let longestStall = Atomic<Int>(0)
        /// When the main actor last ran the frame timer, in ns since the start.
        let heartbeat = Atomic<Int>(0)
        /// When the monitor task last ran (on the cooperative pool), in ns since the start.
        let monitorBeat = Atomic<Int>(0)
        let stopping = Atomic<Bool>(false)
        let finished = Atomic<Bool>(false)
        let failures = Mutex<[String: Int]>([:])
        let start = ContinuousClock.now

        var resolved: Int { succeeded.load(ordering: .relaxed) + cancelled.load(ordering: .relaxed) + failed.load(ordering: .relaxed) }
        var outstanding: Int { enqueued.load(ordering: .relaxed) - resolved }
        var isStopping: Bool { stopping.load(ordering: .relaxed) }

        func nanoseconds(at instant: ContinuousClock.Instant) -> Int { SoakBench.nanoseconds(start.duration(to: instant)) }

        func noteFailure(_ error: DepotError) {
            failures.withLock { $0["\(error.code)", default: 0] += 1 }
        }
    }

    /// Resident memory of this process, in MB (`VmRSS` in `/proc/self/status`).
    static func residentMegabytes() -> Double {
        statusField("VmRSS").map { $0 / 1024 } ?? 0
    }

    /// Threads of this process (`Threads` in `/proc/self/status`): libdispatch's
    /// workers included. Each thread keeps freed chunks in its own malloc cache
    /// (tcache), which malloc still counts as in use.
    static func threadCount() -> Int? {
        statusField("Threads").map { Int($0) }
    }

    /// The number after `name:` in `/proc/self/status`.
    static func statusField(_ name: String) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            return line.dropFirst(name.count + 1).split(whereSeparator: \.isWhitespace).first.flatMap { Double($0) }
        }
        return nil
    }

    /// What glibc's malloc has handed out and not had back (`inUse`), and
    /// what it holds from the system for that (`system`: arenas and mmapped
    /// chunks), in MB. With resident memory beside them, these tell a leak
    /// from memory the allocator keeps after it was freed. Read from
    /// `malloc_stats()`, which prints to stderr, so stderr goes to a file for
    /// the call; `nil` off glibc.
    static func mallocMegabytes() -> (inUse: Double, system: Double)? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_stats") else { return nil }
        let path = FileManager.default.temporaryDirectory.appending(path: "depot-soak-malloc-\(getpid()).txt").path
        let file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard file >= 0 else { return nil }
        let saved = dup(2)
        dup2(file, 2)
        close(file)
        unsafeBitCast(symbol, to: (@convention(c) () -> Void).self)()
        dup2(saved, 2)
        close(saved)
        defer { try? FileManager.default.removeItem(atPath: path) }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        // The last line of each kind is the total, mmapped chunks included.
        func total(_ label: String) -> Double? {
            text.split(separator: "\n").last(where: { $0.contains(label) })
                .flatMap { $0.split(separator: "=").last }
                .flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        }
        guard let inUse = total("in use bytes"), let system = total("system bytes") else { return nil }
        return (inUse / 1_048_576, system / 1_048_576)
    }

    /// What SQLite has allocated (`sqlite3_memory_used()`: page caches, statements), in MB.
    static func sqliteMegabytes() -> Double? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sqlite3_memory_used") else { return nil }
        return Double(unsafeBitCast(symbol, to: (@convention(c) () -> Int64).self)()) / 1_048_576
    }

    /// `10m`, `90s`, `1h` or plain seconds.
    static func parseDuration(_ text: String) -> Duration? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600]
        if let unit = text.last, let factor = units[unit], let value = Int64(text.dropLast()) { return .seconds(value * factor) }
        return Int64(text).map { .seconds($0) }
    }
}
