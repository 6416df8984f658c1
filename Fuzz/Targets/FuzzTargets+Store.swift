import Depot
import DepotStore
import Foundation
import GRDB
import Synchronization

extension FuzzTargets {
    /// The cache file every input damages: a schema of one app table, 300
    /// rows of which two are protected, and one outbox entry, all
    /// checkpointed into the file (its log empty). Made once per process, on
    /// disk: kept in memory, LeakSanitizer reports it (a global's `Data`
    /// does not count as reachable).
    static func storeSeed() -> Data {
        let path = storeSeedPath()
        if let seed = FileManager.default.contents(atPath: path) { return seed }
        atexit { try? FileManager.default.removeItem(atPath: FuzzTargets.storeSeedPath()) }
        let folder = storeScratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let made = folder.appending(path: "seed.sqlite").path
        do {
            let store = try Store(path: made, migrator: storeMigrator, retention: storeRetention)
            try store.writer.write { db in
                for id in 0..<300 {
                    try db.execute(
                        sql: "INSERT INTO note (id, isRead, body) VALUES (?, ?, ?)",
                        arguments: [id, id == 3 || id == 290, String(repeating: "b", count: 200 + id % 50)])
                }
                try db.execute(
                    sql: "INSERT INTO depotOutbox (typeName, lane, payload, idempotencyKey, createdAt) VALUES ('Fuzz', 'lane', x'7B7D', 'key', '2026-01-01 00:00:00')")
            }
            try store.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try waitFor { try await store.close() }
            try FileManager.default.moveItem(atPath: made, toPath: path)
            return try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            fail("store", "cannot make the seed file: \(error)")
        }
    }

    /// Makes the seed file, and runs one sound input, so that what the
    /// first open of a store sets up for good (the seed, the concurrency
    /// pool's threads, GRDB's and SQLite's globals) exists before fuzzing.
    static func prepareStore() {
        store(Data())
    }

    private static func storeSeedPath() -> String {
        FileManager.default.temporaryDirectory.appending(path: "depot-fuzz-store-seed-\(getpid()).sqlite").path
    }

    static let storeMigrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("notes") { db in
            try db.create(table: "note") { t in
                t.primaryKey("id", .integer)
                t.column("isRead", .boolean).notNull().defaults(to: false)
                t.column("body", .text).notNull()
            }
        }
        return migrator
    }()

    static let storeRetention = Retention(policies: [
        RetentionPolicy(table: "note", keeping: [.maxCount(1_000, newestBy: "id")], protecting: "isRead = 1"),
    ])

    /// A `Store` on a damaged copy of ``storeSeed``.
    ///
    /// The input is a list of edits of four bytes each: three for an offset
    /// into the file (big-endian, modulo its length) and one for the byte
    /// written there; an offset of `0xFFFFFF` instead cuts the file at the
    /// next edit's offset.
    ///
    /// Invariants: the store always opens, sound or rebuilt, never with an
    /// error; if a read or a write then meets damage,
    /// ``Store/recoverIfDamaged()`` rebuilds the file, and the access then
    /// succeeds; after one more ``Store/recoverIfDamaged()``, SQLite's
    /// `integrity_check` says `ok`. A rebuild that reports no loss kept the
    /// outbox entry, and keeps the damaged file.
    static func store(_ data: Data) {
        var file = storeSeed()
        var edits = Array(data)[...]
        while edits.count >= 4 {
            let offset = Int(edits[edits.startIndex]) << 16 | Int(edits[edits.startIndex + 1]) << 8 | Int(edits[edits.startIndex + 2])
            let value = edits[edits.startIndex + 3]
            edits = edits.dropFirst(4)
            if offset == 0xFFFFFF {
                file = file.prefix(Int(value) << 12)
            } else if !file.isEmpty {
                file[offset % file.count] = value
            }
        }
        let folder = storeScratch()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        do {
            try file.write(to: URL(fileURLWithPath: path))
        } catch {
            fail("store", "cannot write the damaged file: \(error)")
        }
        let store: Store
        do {
            store = try Store(path: path, migrator: storeMigrator, retention: storeRetention)
        } catch {
            fail("store", "the damaged file neither opened nor was rebuilt: \(error)")
        }
        if let recovery = store.lastRecovery { checkRecovery(recovery) }
        let readAll: @Sendable (Database) throws -> Void = { db in
            _ = try GRDB.Row.fetchAll(db, sql: "SELECT * FROM note")
            _ = try GRDB.Row.fetchAll(db, sql: "SELECT * FROM depotOutbox")
            _ = try GRDB.Row.fetchAll(db, sql: "SELECT * FROM depot_sync_ledger")
        }
        let write: @Sendable (Database) throws -> Void = { db in
            try db.execute(sql: "INSERT OR REPLACE INTO note (id, body) VALUES (10000, 'after')")
        }
        do {
            try waitFor {
                // Damage past what the open looked at: the store rebuilds it
                // when a read or a write meets it, or when asked to look.
                try await carryOn(store) { try await store.read(readAll) }
                try await carryOn(store) { try await store.write(write) }
                if let recovery = try await store.recoverIfDamaged() { checkRecovery(recovery) }
                let findings = try await store.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
                check(findings == ["ok"], "store", "integrity_check after recoverIfDamaged: \(findings.prefix(3))")
                try await store.read(readAll)
                try await store.close()
            }
        } catch {
            fail("store", "the store did not carry on: \(error)")
        }
    }

    /// Runs `access`; if it fails, the store must find damage and rebuild,
    /// and then `access` must succeed.
    private static func carryOn(_ store: Store, _ access: @Sendable () async throws -> Void) async throws {
        do {
            try await access()
        } catch {
            guard let recovery = try await store.recoverIfDamaged() else {
                fail("store", "an access failed (\(error)) and recoverIfDamaged found nothing to rebuild")
            }
            checkRecovery(recovery)
            try await access()
        }
    }

    private static func checkRecovery(_ recovery: StoreRecovery) {
        check(recovery.error.code == .storage, "store", "a recovery's error is \(recovery.error.code)")
        check(recovery.damagedFile.map { FileManager.default.fileExists(atPath: $0) } ?? false,
              "store", "the damaged file was not kept: \(recovery)")
        if recovery.isLossless {
            check(recovery.keptPendingWrites == 1, "store", "a lossless rebuild lost the outbox entry: \(recovery)")
        }
    }

    private static func storeScratch() -> URL {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-fuzz-store-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    /// Runs `body` on the cooperative pool and blocks the fuzzer's thread until it ends.
    private static func waitFor(_ body: @escaping @Sendable () async throws -> Void) throws {
        let result = Mutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let outcome: Result<Void, any Error>
            do {
                try await body()
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        try result.withLock { $0 }?.get()
    }
}
