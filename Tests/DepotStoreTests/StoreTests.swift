import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

@Suite struct StoreTests {
    @Test func newFileIsPrivateToTheOwnerAndInWALMode() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path

        let store = try Store(path: path, migrator: Item.migrator)

        let permissions = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
        #expect(permissions?.intValue == 0o600)
        let mode = try store.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
        #expect(store.path == path)
    }

    @Test func appMigrationsAndTheLedgerTableExist() throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let tables = try store.writer.read { db in
            (try db.tableExists("item"), try db.tableExists(SyncLedger.tableName))
        }
        #expect(tables == (true, true))
    }

    @Test func reopeningKeepsDataAndRunsOnlyNewMigrations() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        do {
            let store = try Store(path: path, migrator: Item.migrator)
            try await store.write { db in try Item(id: 1, section: "a", rank: 1, title: "kept").insert(db) }
            try await store.close()
        }
        var migrator = Item.migrator
        migrator.registerMigration("notes") { db in
            try db.alter(table: "item") { t in t.add(column: "note", .text) }
        }
        let reopened = try Store(path: path, migrator: migrator)
        let titles = try await reopened.read { db in try String.fetchAll(db, sql: "SELECT title FROM item") }
        #expect(titles == ["kept"])
        let columns = try await reopened.read { db in try db.columns(in: "item").map(\.name) }
        #expect(columns.contains("note"))
    }

    /// Opens that race for a new file take turns: the file is made in place,
    /// so every opener's lock is on the same file. (Made aside and renamed,
    /// as `FileManager.createFile` does, two openers could lock two files,
    /// migrate at once and meet "UNIQUE constraint failed: grdb_migrations".)
    @Test func openersRacingForANewFileAllOpenIt() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        for round in 0..<20 {
            let path = folder.appending(path: "race-\(round).sqlite").path
            let failures = await withTaskGroup(of: String?.self) { group in
                for _ in 0..<6 {
                    group.addTask {
                        // Threads of their own: each open blocks on the lock.
                        await withCheckedContinuation { continuation in
                            Thread.detachNewThread {
                                do {
                                    _ = try Store(path: path, migrator: Item.migrator)
                                    continuation.resume(returning: nil)
                                } catch {
                                    continuation.resume(returning: "\(error)")
                                }
                            }
                        }
                    }
                }
                return await group.compactMap { $0 }.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(failures.isEmpty, "round \(round): \(failures)")
        }
    }

    @Test func aPathThatCannotBeOpenedIsAStorageError() throws {
        let error = #expect(throws: DepotError.self) {
            try Store(path: "/nonexistent-folder-\(UUID().uuidString)/cache.sqlite")
        }
        #expect(error?.code == .storage)
        #expect(error?.description.contains("cannot create the database file") == true, "\(String(describing: error))")
    }

    /// The default rebuilds such a file (see `StoreRecoveryTests`); an app
    /// that chose to fail gets the error.
    @Test func aFileThatIsNotADatabaseIsAStorageErrorWhenTheAppChoseToFail() throws {
        let file = FileManager.default.temporaryDirectory.appending(path: "not-a-database-\(UUID().uuidString).sqlite")
        try Data(repeating: 0x41, count: 4096).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let error = #expect(throws: DepotError.self) {
            try Store(path: file.path, onCorruption: .fail)
        }
        #expect(error?.code == .storage)
    }

    @Test func aFailedWriteRollsBackAndSaysWhy() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let error = await #expect(throws: DepotError.self) {
            try await store.write { db in
                try Item(id: 1, section: "a", rank: 1, title: "one").insert(db)
                try Item(id: 1, section: "a", rank: 1, title: "duplicate").insert(db)
            }
        }
        #expect(error?.code == .storage)
        #expect(error?.underlying is DatabaseError)
        let count = try await store.read { db in try Item.fetchCount(db) }
        #expect(count == 0)
    }

    @Test func ledgerRecordsSuccessFailureAndReset() async throws {
        let date = ManualDate()
        let store = try Store.inMemory(migrator: Item.migrator, environment: .init(date: date.provider))
        #expect(try await store.ledger.entry(for: "k") == nil)

        try await store.write { db in
            try SyncLedger.recordSuccess(for: "k", at: date.now, validators: Validators(etag: "\"v1\"", lastModified: "Tue, 01 Sep 2026 10:00:00 GMT"), in: db)
        }
        date.advance(by: 60)
        await store.ledger.recordFailure(DepotError(.offline, operation: "FetchItems"), for: "k")

        let entry = try #require(try await store.ledger.entry(for: "k"))
        #expect(entry.lastSynced == date.now.addingTimeInterval(-60))
        #expect(entry.etag == "\"v1\"")
        #expect(entry.lastError?.code == .offline)
        #expect(entry.lastError?.message.contains("FetchItems") == true)
        #expect(entry.lastError?.date == date.now)

        // A success clears the error; a 304 (no validators) keeps the old ones.
        try await store.write { db in try SyncLedger.recordSuccess(for: "k", at: date.now, validators: nil, in: db) }
        let after = try #require(try await store.ledger.entry(for: "k"))
        #expect(after.lastError == nil)
        #expect(after.etag == "\"v1\"")
        #expect(after.lastSynced == date.now)

        try await store.ledger.reset("k")
        #expect(try await store.ledger.entry(for: "k") == nil)
    }

    /// Closes wait for the reads under way off Swift's cooperative pool: as
    /// many closes as the pool has threads, beside a read that is not done,
    /// all return. (GRDB's close blocks its caller until every reader is
    /// back, and an async read gives its reader back on that pool: closes
    /// that blocked its threads waited for a read that waited for them.)
    @Test(.timeLimit(.minutes(1))) func closesBesideAReadUnderWayDoNotDeadlock() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: Item.migrator)
        try await store.write { db in try Item(id: 1, section: "a", rank: 1, title: "one").insert(db) }
        let readStarted = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let read = Task {
            try await store.read { db in
                readStarted.signal()
                release.wait()
                return try Item.fetchCount(db)
            }
        }
        // Waited for on a thread outside the pool, as everything here that blocks.
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                readStarted.wait()
                continuation.resume()
            }
        }
        let closers = max(2, ProcessInfo.processInfo.activeProcessorCount)
        let entered = DispatchGroup()
        for _ in 0..<closers { entered.enter() }
        // Once every close has begun, the read may finish.
        DispatchQueue.global().async {
            entered.wait()
            release.signal()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<closers {
                group.addTask {
                    entered.leave()
                    try await store.close()
                }
            }
            try await group.waitForAll()
        }
        #expect(try await read.value == 1)
        let afterClose = await #expect(throws: DepotError.self) { try await store.read { db in try Item.fetchCount(db) } }
        #expect(afterClose?.code == .storage)
    }

    /// A cache file that another tool left readable by others is tightened
    /// to 0600 on open, with its `-wal` and `-shm` files.
    @Test func anExistingFileWithLooserPermissionsIsTightened() async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "store-permissions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        do {
            let store = try Store(path: path)
            try await store.close()
        }
        for file in [path, path + "-wal", path + "-shm"] {
            if !FileManager.default.fileExists(atPath: file) { _ = FileManager.default.createFile(atPath: file, contents: nil) }
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        }
        let store = try Store(path: path)
        for file in [path, path + "-wal", path + "-shm"] {
            let permissions = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber
            #expect(permissions?.intValue == 0o600, "\(file)")
        }
        try await store.close()
    }
}
