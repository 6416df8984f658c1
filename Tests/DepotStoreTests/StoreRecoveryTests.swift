import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// Damaged store files, broken the ways real devices break them: each holds
/// a pending outbox entry and read notes (which retention protects) that
/// must survive wherever SQLite can still read them.
@Suite(.timeLimit(.minutes(1))) struct StoreRecoveryTests {
    typealias SendPost = OutboxTests.SendPost
    typealias PostRow = OutboxTests.PostRow

    /// Notes 7 and 390 are read: the rows retention protects.
    static let readNotes = [7, 390]
    static let noteCount = 400

    static let migrator: DatabaseMigrator = {
        var migrator = OutboxTests.migrator
        Note.registerMigration(in: &migrator)
        return migrator
    }()

    static let retention = Retention(policies: [
        RetentionPolicy(table: "note", keeping: [.maxCount(10_000, newestBy: "createdAt")], protecting: "isRead = 1"),
    ])

    struct Setup {
        let folder: URL
        var path: String { folder.appending(path: "cache.sqlite").path }
        let date = ManualDate()

        func store(onCorruption: CorruptionPolicy = .rebuild()) throws -> Store {
            try Store(
                path: path, migrator: StoreRecoveryTests.migrator, retention: StoreRecoveryTests.retention,
                onCorruption: onCorruption, environment: .init(date: date.provider))
        }

        /// A controller whose every request finds no network.
        func offlineController(store: Store) -> NetworkController {
            OutboxTests.Setup(folder: folder).offlineController(store: store)
        }

        /// Fills a store: 400 notes of about 600 bytes (a hundred pages),
        /// two of them read, and one post queued offline. Leaves it closed,
        /// with everything in the file and its write-ahead log empty (a
        /// damaged header behind a log that holds page 1 is no damage: SQLite
        /// reads the page from the log, and writes it back at a checkpoint).
        func fill() async throws {
            let store = try store()
            await store.evictionIdle()
            try await store.insert(Note.make(StoreRecoveryTests.noteCount, now: date.now, body: String(repeating: "n", count: 600)))
            try await store.write { db in
                try db.execute(sql: "UPDATE note SET isRead = 1 WHERE id IN (7, 390)")
            }
            let controller = offlineController(store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            try await outbox.send(SendPost("local-1", "queued before the damage"))
            _ = await controller.shutdown(grace: .zero)
            await outbox.waitUntilIdle()
            try await store.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try await store.close()
        }

        /// The file's size in pages of 4 KB.
        var pages: Int {
            get throws { try StoreRecoveryTests.fileSize(path) / 4096 }
        }

        /// Overwrites `length` bytes at `offset` of `file` with `bytes`.
        func overwrite(_ file: String? = nil, at offset: Int, with bytes: [UInt8]) throws {
            let handle = try #require(FileHandle(forUpdatingAtPath: file ?? path))
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: bytes)
        }
    }

    static func fileSize(_ path: String) throws -> Int {
        try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber).intValue
    }

    func withSetup<T>(_ body: (Setup) async throws -> T) async throws -> T {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(Setup(folder: folder))
    }

    /// Noise that is never a valid page: no b-tree page starts with 0xEE.
    static func noise(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return [0xEE] + (1..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// What a rebuilt store must show: the queued post and its optimistic
    /// row, the read notes it could read, a fresh ledger.
    static func expectSalvaged(_ store: Store, readNotes: [Int] = readNotes) async throws {
        let entries = try await store.read { db in try String.fetchAll(db, sql: "SELECT typeName FROM depotOutbox WHERE state = 'pending'") }
        #expect(entries == [SendPost.typeName])
        let read = try await store.read { db in try Int.fetchAll(db, sql: "SELECT id FROM note WHERE isRead = 1 ORDER BY id") }
        #expect(read == readNotes)
        #expect(try await store.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") } == ["ok"])
    }

    // MARK: - At open

    @Test func aGarbageHeaderIsRebuiltKeepingTheOutboxAndTheReadNotes() async throws {
        try await withSetup { setup in
            try await setup.fill()
            try setup.overwrite(at: 0, with: Array(String(repeating: "garbage!", count: 12).utf8.prefix(100)))
            let damagedBytes = try Data(contentsOf: URL(fileURLWithPath: setup.path))

            let store = try setup.store()
            let recovery = try #require(store.lastRecovery)
            #expect(recovery.kept == ["depotOutbox": 1, "note": 2])
            #expect(recovery.isLossless)
            #expect(recovery.error.code == .storage)
            let kept = try #require(recovery.damagedFile)
            #expect(kept.hasPrefix(setup.path + ".damaged-"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: kept)) == damagedBytes, "the damaged file is kept as it was")
            try await Self.expectSalvaged(store)
            #expect(recovery.description.hasPrefix("The cache file was damaged and has been rebuilt, keeping 1 pending change and 2 other saved rows; the damaged file is at \(setup.path).damaged-"))
            // The notes nobody protected are gone: syncs refill them.
            #expect(try await store.read { db in try Note.fetchCount(db) } == 2)
            try await store.close()
        }
    }

    @Test func aFileOfTextIsRebuiltWithNothingToKeepAndSaysSo() async throws {
        try await withSetup { setup in
            try Data("garbage".utf8).write(to: URL(fileURLWithPath: setup.path))
            let store = try setup.store()
            let recovery = try #require(store.lastRecovery)
            #expect(recovery.kept == [:])
            #expect(!recovery.isLossless, "nothing could be read: the outbox may have held entries")
            #expect(Set(recovery.incomplete) == ["depotOutbox", "note"])
            #expect(recovery.description.contains("some saved rows may not have been recovered"))
            try await store.insert(Note.make(1, now: setup.date.now))
            try await store.close()
        }
    }

    @Test func aFileCutInHalfKeepsWhatTheFirstHalfHolds() async throws {
        try await withSetup { setup in
            try await setup.fill()
            let handle = try #require(FileHandle(forUpdatingAtPath: setup.path))
            try handle.truncate(atOffset: UInt64(try setup.pages / 2 * 4096))
            try handle.close()

            let store = try setup.store()
            let recovery = try #require(store.lastRecovery)
            // Note 7 is on an early page; note 390 was on one of the pages cut off.
            #expect(recovery.kept["depotOutbox"] == 1)
            #expect(recovery.kept["note"] == 1)
            #expect(recovery.lost["note"] == 1 || recovery.incomplete == ["note"])
            try await Self.expectSalvaged(store, readNotes: [7])
            try await store.close()
        }
    }

    @Test func noiseOverAPageInTheMiddleIsFoundAtTheFirstReadAndRebuiltInPlace() async throws {
        try await withSetup { setup in
            try await setup.fill()
            let middle = try setup.pages / 2
            try setup.overwrite(at: middle * 4096, with: Self.noise(4096))

            // The header and the schema are sound: the file opens.
            let store = try setup.store()
            #expect(store.lastRecovery == nil)
            let recoveries = store.recoveries()
            // The first read that meets the page fails, and starts the rebuild;
            // the launch eviction may be that read, and then this one waits
            // for the rebuild and succeeds.
            _ = try? await store.read { db in try Note.fetchAll(db) }
            var iterator = recoveries.makeAsyncIterator()
            let announced: StoreRecovery? = if let last = store.lastRecovery { last } else { await iterator.next() }
            let recovery = try #require(announced)
            #expect(recovery.kept == ["depotOutbox": 1, "note": 2])
            #expect(store.lastRecovery?.date == recovery.date)
            try await Self.expectSalvaged(store)
            let notes = try await store.read { db in try Note.fetchCount(db) }
            #expect(notes == 2)
            try await store.close()
        }
    }

    @Test func aDamagedWriteAheadLogLosesOnlyTheTransactionsFromTheDamageOn() async throws {
        try await withSetup { setup in
            try await setup.fill()
            // A crash leaves the last commits in the log: copy the file and its
            // log while a store holds them, as a crash would leave them.
            let store = try setup.store()
            try await store.writer.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            }
            try await store.write { db in try db.execute(sql: "UPDATE note SET starred = 1 WHERE id = 8") }
            try await store.insert(Note.make(100, from: 1_000, now: setup.date.now, body: String(repeating: "w", count: 600)))
            let crashed = setup.folder.appending(path: "crashed.sqlite").path
            try FileManager.default.copyItem(atPath: setup.path, toPath: crashed)
            try FileManager.default.copyItem(atPath: setup.path + "-wal", toPath: crashed + "-wal")
            try await store.close()
            // Noise over a frame in the middle of the second transaction.
            let wal = try Self.fileSize(crashed + "-wal")
            try setup.overwrite(crashed + "-wal", at: wal / 2, with: Self.noise(512))

            let reopened = try Store(path: crashed, migrator: Self.migrator, retention: Self.retention, environment: .init(date: setup.date.provider))
            #expect(reopened.lastRecovery == nil, "SQLite's own recovery stops at the damaged frame")
            try await Self.expectSalvaged(reopened)
            #expect(try await reopened.read { db in try Int.fetchAll(db, sql: "SELECT id FROM note WHERE starred") } == [8])
            #expect(try await reopened.read { db in try Note.filter(Column("id") >= 1_000).fetchCount(db) } == 0)
            try await reopened.close()
        }
    }

    @Test func theFailPolicyLeavesTheFileAsItWasAndThrows() async throws {
        try await withSetup { setup in
            try await setup.fill()
            try setup.overwrite(at: 0, with: Array(repeating: 0x41, count: 100))
            let before = try Data(contentsOf: URL(fileURLWithPath: setup.path))
            let error = try #require(throws: DepotError.self) { try setup.store(onCorruption: .fail) }
            #expect(error.code == .storage)
            #expect(error.description.contains("is damaged"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: setup.path)) == before)
            let aside = try FileManager.default.contentsOfDirectory(atPath: setup.folder.path).filter { $0.contains("damaged") }
            #expect(aside.isEmpty)
        }
    }

    @Test func aRebuildIsAnnouncedOnceByNotification() async throws {
        try await withSetup { setup in
            try await setup.fill()
            try setup.overwrite(at: 0, with: Array(repeating: 0x41, count: 100))
            let received = Mutex<[StoreRecovery]>([])
            let token = NotificationCenter.default.addObserver(forName: .depotStoreRecovered, object: nil, queue: nil) { note in
                guard let recovery = note.userInfo?[StoreRecovery.UserInfoKey.recovery] as? StoreRecovery,
                      (note.object as? Store)?.path == setup.path else { return }
                received.withLock { $0.append(recovery) }
            }
            defer { NotificationCenter.default.removeObserver(token) }
            let store = try setup.store()
            #expect(received.withLock { $0.map(\.kept) } == [["depotOutbox": 1, "note": 2]])
            try await store.close()
            // Reopened sound: nothing to announce.
            let again = try setup.store()
            #expect(again.lastRecovery == nil)
            #expect(received.withLock { $0.count } == 1)
            try await again.close()
        }
    }

    // MARK: - Carrying on

    /// Damage found during use: the app goes on, the salvaged entry reaches
    /// the server, and its optimistic row, which was in a table not kept,
    /// is back before it commits.
    @Test func afterARebuildInPlaceTheSalvagedEntryIsDeliveredAndItsRowCommitted() async throws {
        try await withSetup { setup in
            try await setup.fill()
            try await DemoServer.withRunning(.init(port: 0)) { server in
                let store = try setup.store()
                let controller = OutboxTests.Setup(folder: setup.folder).controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try setup.overwrite(at: (try setup.pages / 2) * 4096, with: Self.noise(4096))
                let recovery = try #require(try await store.recoverIfDamaged())
                #expect(recovery.keptPendingWrites == 1)
                #expect(try await OutboxTests.rows(store) == [PostRow(localID: "local-1", serverID: nil, text: "queued before the damage", isPending: true)])

                let id = try #require(try await outbox.entries().first?.id)
                try await outbox.start()
                #expect(try await outbox.outcome(of: id).get().status == 201)
                #expect(try await OutboxTests.rows(store).map(\.isPending) == [false])
                // A sound file: nothing to do.
                #expect(try await store.recoverIfDamaged() == nil)
                try await OutboxTests.quit(controller, outbox, closing: store)
            }
        }
    }

    /// Damage found at open: the first outbox on the store puts the
    /// salvaged entry's optimistic row back.
    @Test func afterARebuildAtOpenTheFirstOutboxRestoresTheOptimisticRows() async throws {
        try await withSetup { setup in
            try await setup.fill()
            try setup.overwrite(at: 0, with: Array(repeating: 0x41, count: 100))
            let store = try setup.store()
            #expect(store.lastRecovery?.keptPendingWrites == 1)
            #expect(try await OutboxTests.rows(store).isEmpty)
            let controller = setup.offlineController(store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            try await outbox.start()
            #expect(try await OutboxTests.rows(store).map(\.localID) == ["local-1"])
            try await OutboxTests.quit(controller, outbox, closing: store)
        }
    }

    // MARK: - Read-only

    /// A cache on a read-only file system, without its `-wal` and `-shm`
    /// (the case that failed with "unable to open database file"): it opens
    /// read-only, shows what it holds, and refuses writes clearly.
    @Test(.enabled(if: ReadOnlyMount.isAvailable, "needs root to bind-mount a folder read-only"))
    func aCacheOnAReadOnlyFileSystemOpensReadOnly() async throws {
        try await withSetup { setup in
            try await setup.fill()
            for companion in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: setup.path + companion) }
            try await ReadOnlyMount.with(setup.folder) {
                let store = try setup.store()
                #expect(store.isReadOnly)
                #expect(try await store.read { db in try Note.fetchCount(db) } == Self.noteCount)
                #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM depotOutbox") } == 1)
                let error = await #expect(throws: DepotError.self) {
                    try await store.insert(Note.make(1, from: 5_000, now: setup.date.now))
                }
                #expect(error?.code == .storage)
                #expect((error?.underlying as? DatabaseError)?.resultCode == .SQLITE_READONLY)
                try await store.close()
            }
            // Writable again: the next open is read-write, and nothing changed.
            let store = try setup.store()
            #expect(!store.isReadOnly)
            #expect(try await store.read { db in try Note.fetchCount(db) } == Self.noteCount)
            try await store.close()
        }
    }
}

/// A folder bind-mounted read-only onto itself for the length of a test.
enum ReadOnlyMount {
    static let isAvailable: Bool = {
        guard getuid() == 0, let folder = try? temporaryFolder() else { return false }
        defer { try? FileManager.default.removeItem(at: folder) }
        guard run(["mount", "--bind", folder.path, folder.path]) else { return false }
        return run(["umount", folder.path])
    }()

    static func with<T>(_ folder: URL, _ body: () async throws -> T) async throws -> T {
        try #require(run(["mount", "--bind", folder.path, folder.path]))
        defer { _ = run(["umount", folder.path]) }
        try #require(run(["mount", "-o", "remount,ro,bind", folder.path]))
        return try await body()
    }

    @discardableResult
    private static func run(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
