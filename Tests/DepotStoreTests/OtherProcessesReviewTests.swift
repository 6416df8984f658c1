import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// Review of `refreshFromOtherProcesses()`: what a look answers, and what it waits for.
@Suite(.timeLimit(.minutes(1))) struct OtherProcessesReviewTests {
    /// An in-memory store has no other process: its first look finds nothing.
    @Test func anInMemoryStoresFirstLookFindsNoOtherProcess() async throws {
        let store = try Store.inMemory(migrator: Note.migrator)
        #expect(try await !store.refreshFromOtherProcesses())
    }

    /// A look only reads `PRAGMA data_version`: in WAL mode it need not wait
    /// for another process's write transaction (an extension's long sync).
    @Test func aLookDoesNotWaitForAnotherProcesssWriteLock() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = Configuration()
        configuration.busyMode = .timeout(0.3)
        let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: Note.migrator, configuration: configuration)
        var otherConfiguration = Configuration()
        otherConfiguration.allowsUnsafeTransactions = true
        let other = try DatabaseQueue(path: try #require(store.path), configuration: otherConfiguration)
        // Another process inserts, then holds the write lock.
        try await other.write { db in try db.execute(sql: "INSERT INTO note (id, feed, createdAt, rank) VALUES (1, 'a', 0, 1)") }
        try await other.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
        let looked: Result<Bool, DepotError>
        do { looked = .success(try await store.refreshFromOtherProcesses()) } catch { looked = .failure(error) }
        try await other.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
        #expect((try? looked.get()) == true, "\(looked)")
        try other.close()
        try await store.close()
    }
}
