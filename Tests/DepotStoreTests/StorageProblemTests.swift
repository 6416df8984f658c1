#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// What `DepotError.storageProblem` names, each from the real condition on a
/// real file: a page limit that fills the file, a lock another connection
/// holds, a read-only connection, a file migrated further, a file that is no database.
@Suite struct StorageProblemTests {
    /// `count` items with long titles: more pages than a full file has left.
    static let bulky = (0..<200).map { Item(id: $0, section: "s", rank: $0, title: String(repeating: "x", count: 1_000)) }

    func withFile<T>(_ body: (String) async throws -> T) async throws -> T {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(folder.appending(path: "cache.sqlite").path)
    }

    /// Caps the writer's file at its current size: SQLite answers `SQLITE_FULL`
    /// to a write that needs one more page, as it does on a full disk.
    static func fill(_ store: Store) async throws {
        try await store.writer.writeWithoutTransaction { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            try db.execute(sql: "PRAGMA max_page_count = \(pages)")
        }
    }

    @Test func aFullFileIsDiskFull() async throws {
        try await withFile { path in
            let store = try Store(path: path, migrator: Item.migrator)
            try await Self.fill(store)
            let error = await #expect(throws: DepotError.self) {
                try await store.write { db in for item in Self.bulky { try item.insert(db) } }
            }
            #expect(error?.code == .storage)
            #expect(error?.storageProblem == .diskFull)
            // Nothing was half-written: the transaction rolled back whole.
            #expect(try await store.read { db in try Item.fetchCount(db) } == 0)
            // The technical detail stays for logs, with no "request" in it.
            #expect(error?.description.hasPrefix("cache error: write failed (SQLite error 13") == true, "\(String(describing: error))")
        }
    }

    @Test func aLockHeldPastTheBusyTimeoutIsLocked() async throws {
        try await withFile { path in
            let store = try Store(path: path, migrator: Item.migrator, configuration: Self.busyTimeout(0.05))
            // Another connection (another process, as far as SQLite can tell) holds the write lock.
            var holderConfiguration = Configuration()
            holderConfiguration.allowsUnsafeTransactions = true
            let holder = try DatabaseQueue(path: path, configuration: holderConfiguration)
            try await holder.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            let error = await #expect(throws: DepotError.self) {
                try await store.write { db in try Item(id: 1, section: "s", rank: 1, title: "t").insert(db) }
            }
            #expect(error?.storageProblem == .locked)
            try await holder.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
        }
    }

    @Test func aReadOnlyConnectionIsReadOnly() async throws {
        try await withFile { path in
            try await Store(path: path, migrator: Item.migrator).close()
            var configuration = Configuration()
            configuration.readonly = true
            let store = try Store(path: path, migrator: Item.migrator, configuration: configuration)
            let error = await #expect(throws: DepotError.self) {
                try await store.write { db in try Item(id: 1, section: "s", rank: 1, title: "t").insert(db) }
            }
            #expect(error?.storageProblem == .readOnly)
        }
    }

    /// A newer app added a migration: this version still reads and writes
    /// the file as far as its tables allow, and what the newer tables refuse
    /// (here a column this version does not fill) is told as a newer schema.
    @Test func aFileMigratedByANewerAppIsReadAndWhatItRefusesIsNewerSchema() async throws {
        try await withFile { path in
            var newer = Item.migrator
            newer.registerMigration("items-v2") { db in
                try db.alter(table: "item") { t in t.add(column: "subtitle", .text) }
            }
            newer.registerMigration("items-v3") { db in
                try db.alter(table: "item") { t in t.add(column: "priority", .integer).notNull().defaults(to: 0) }
                try db.execute(sql: "CREATE TABLE tag (name TEXT NOT NULL)")
            }
            let newest = try Store(path: path, migrator: newer)
            try await newest.write { db in try Item(id: 1, section: "a", rank: 1, title: "from the newer app").insert(db) }
            try await newest.close()

            // Opened by this version: readable, and writable where nothing new is in the way.
            let store = try Store(path: path, migrator: Item.migrator)
            #expect(store.newerMigrations == ["items-v2", "items-v3"])
            #expect(try await store.read { db in try Item.fetchAll(db).map(\.title) } == ["from the newer app"])
            try await store.write { db in try Item(id: 2, section: "a", rank: 2, title: "from this app").insert(db) }
            // A write the newer tables refuse.
            let error = await #expect(throws: DepotError.self) {
                try await store.write { db in try db.execute(sql: "INSERT INTO tag (name) VALUES (NULL)") }
            }
            #expect(error?.code == .storage)
            #expect(error?.storageProblem == .newerSchema)
            #expect(error?.description.contains("unknown migrations: items-v2, items-v3") == true, "\(String(describing: error))")
            try await store.close()
            // The same failure on a file this version migrated is no newer schema.
            let own = try Store(path: path, migrator: newer)
            #expect(own.newerMigrations.isEmpty)
            let plain = await #expect(throws: DepotError.self) {
                try await own.write { db in try db.execute(sql: "INSERT INTO tag (name) VALUES (NULL)") }
            }
            #expect(plain?.storageProblem == nil)
            try await own.close()
        }
    }

    /// With the default, such a file is rebuilt (`StoreRecoveryTests`).
    @Test func aFileThatIsNoDatabaseIsDamagedWhenTheAppChoseToFail() async throws {
        try await withFile { path in
            try Data("garbage".utf8).write(to: URL(fileURLWithPath: path))
            let error = #expect(throws: DepotError.self) {
                _ = try Store(path: path, migrator: Item.migrator, onCorruption: .fail)
            }
            #expect(error?.storageProblem == .damaged)
            #expect(error?.description.hasPrefix("cache error: the store at") == true, "\(String(describing: error))")
        }
    }

    /// Root opens every file: the command-line tests run the apps as another
    /// user for this (`StorageSentencesTests`).
    @Test(.enabled(if: getuid() != 0, "root may open any file"))
    func aFileWithoutPermissionsIsNoPermission() async throws {
        try await withFile { path in
            try await Store(path: path, migrator: Item.migrator).close()
            try FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: path)
            let error = #expect(throws: DepotError.self) {
                _ = try Store(path: path, migrator: Item.migrator)
            }
            #expect(error?.storageProblem == .noPermission)
        }
    }

    /// Wrapped errors keep their problem: an operation's processing failure
    /// around a failed write, and a dependency's failure.
    @Test func wrappersKeepTheProblem() {
        let full = DepotError(.storage, detail: "write failed", underlying: DatabaseError(resultCode: .SQLITE_FULL))
        #expect(DepotError(.processing, operation: "Post", underlying: full).storageProblem == .diskFull)
        #expect(DepotError(.dependencyFailed, underlying: full).storageProblem == .diskFull)
        #expect(DepotError(.storage, underlying: POSIXError(.ENOSPC)).storageProblem == .diskFull)
        #expect(DepotError(.storage, underlying: DatabaseError(resultCode: .SQLITE_CONSTRAINT)).storageProblem == nil)
        #expect(DepotError(.offline).storageProblem == nil)
    }

    /// The ledger keeps the problem and the status with the code, and reads them back.
    @Test func theLedgerKeepsTheProblemOfAFailure() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let full = DepotError(.storage, operation: "FetchItems", detail: "write failed", underlying: DatabaseError(resultCode: .SQLITE_FULL))
        await store.ledger.recordFailure(full, for: "items")
        await store.ledger.recordFailure(DepotError.forStatus(503, operation: "FetchItems"), for: "songs")
        let items = try #require(try await store.ledger.entry(for: "items")?.lastError)
        #expect(items.code == .storage)
        #expect(items.storageProblem == .diskFull)
        let songs = try #require(try await store.ledger.entry(for: "songs")?.lastError)
        #expect(songs.code == .server)
        #expect(songs.status == 503)
        #expect(songs.storageProblem == nil)
    }

    static func busyTimeout(_ seconds: TimeInterval) -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(seconds)
        return configuration
    }
}
