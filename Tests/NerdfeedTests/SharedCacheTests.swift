import CLITestSupport
import DepotStore
import Foundation
import GRDB
import Testing

/// Two processes on one cache file, as an app and its extension or two
/// `nerdfeed --once` runs would be: they take turns, none fails.
@Suite(.timeLimit(.minutes(3)))
struct SharedCacheTests {
    /// Twenty rounds of two `nerdfeed --once` at the same time, on a new file
    /// (both create and migrate it) and then on the same file (both sync
    /// into it): no "database is locked", and the file stays sound.
    @Test func twoProcessesShareOneCache() async throws {
        let folder = try Executables.temporaryFolder("nerdfeed-shared")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        var failures: [String] = []
        for round in 0..<20 {
            if round < 10 {
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: cache + suffix) }
            }
            async let first = Executables.run("nerdfeed", ["--once", "--port", "0", "--cache", cache])
            async let second = Executables.run("nerdfeed", ["--once", "--port", "0", "--cache", cache])
            for run in try await [first, second] where run.status != 0 {
                failures.append("round \(round): \(run.status) \(run.error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of 40 runs failed: \(failures.prefix(3))")
        let store = try Store(path: cache)
        #expect(try await store.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") } == ["ok"])
        try await store.close()
    }
}
