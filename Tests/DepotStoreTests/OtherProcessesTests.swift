import Depot
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// Commits that another process makes to the store's file. SQLite tells no
/// connection of another's commits; the store looks (`PRAGMA data_version`
/// on its writer's connection) when asked, on a clock, and before eviction
/// chooses and deletes rows. A second GRDB connection to the file stands for
/// the other process: to SQLite they are the same thing.
@Suite(.timeLimit(.minutes(1))) struct OtherProcessesTests {
    /// Another process's note, inserted on a connection of its own.
    static func insertElsewhere(_ store: Store, id: Int, createdAt: Date = Date()) async throws {
        let other = try DatabaseQueue(path: try #require(store.path))
        try await other.write { db in
            try db.execute(sql: "INSERT INTO note (id, feed, createdAt, rank) VALUES (?, 'a', ?, ?)", arguments: [id, createdAt, id])
        }
        try other.close()
    }

    /// Returns once a commit of the store's own (note 3) has reached
    /// `results`: their observation is running, and nothing else is on its way.
    @MainActor
    static func settle(_ results: ResultsController<Note>, _ store: Store) async throws {
        var updates = results.updates().makeAsyncIterator()
        try await store.insert([Note(id: 3, feed: "a", createdAt: Date(), rank: 3)])
        while let update = await updates.next(), !update.snapshot.fetchedObjects.contains(where: { $0.id == 3 }) {}
    }

    @Test @MainActor func aLookShowsAnotherProcesssCommitInLiveResults() async throws {
        try await withNoteStore(retention: nil) { store in
            // Given live results on three notes, and the store's own write
            try await store.insert(Note.make(3, now: Date()))
            #expect(try await !store.refreshFromOtherProcesses(), "the store's own commit is not another process's")
            let results = try ResultsController(store: store, request: Note.order(Column("rank")))
            try await Self.settle(results, store)
            var updates = results.updates().makeAsyncIterator()
            _ = await updates.next()   // the current snapshot

            // When another process adds a note and the store looks
            try await Self.insertElsewhere(store, id: 100)
            #expect(try await store.refreshFromOtherProcesses())

            // Then the results show it as an insertion, and a second look finds nothing new
            let next = await updates.next()
            let update = try #require(next)
            #expect(update.snapshot.fetchedObjects.map(\.id) == [0, 1, 2, 3, 100])
            #expect(update.changes?.inserted.count == 1)
            #expect(try await !store.refreshFromOtherProcesses())
        }
    }

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

    @Test @MainActor func aWatchLooksOnceEveryIntervalOfItsClock() async throws {
        let clock = ManualClock()
        try await withNoteStore(retention: nil, clock: clock) { store in
            try await store.insert(Note.make(2, now: Date()))
            let results = try ResultsController(store: store, request: Note.order(Column("rank")))
            try await Self.settle(results, store)
            var updates = results.updates().makeAsyncIterator()
            _ = await updates.next()   // the current snapshot
            let watch = Task { await store.watchOtherProcesses(every: .seconds(1)) }

            // When another process adds a note, nothing shows it until the watch's second passes
            try await Self.insertElsewhere(store, id: 50)
            await clock.sleepers(atLeast: 1)
            #expect(results.fetchedObjects.count == 3)
            clock.advance(by: .seconds(1))

            // Then it shows, and the watch sleeps again
            let next = await updates.next()
            let update = try #require(next)
            #expect(update.snapshot.fetchedObjects.map(\.id) == [0, 1, 3, 50])
            await clock.sleepers(atLeast: 1)
            watch.cancel()
            await watch.value
        }
    }

    @Test func aWatchEndsWhenTheStoreCloses() async throws {
        let clock = ManualClock()
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: Note.migrator, environment: .init(clock: clock))
        let watch = Task { await store.watchOtherProcesses(every: .seconds(1)) }
        await clock.sleepers(atLeast: 1)
        try await store.close()
        clock.advance(by: .seconds(1))
        // The time limit fails the test if the watch goes on looking.
        await watch.value
    }

    /// Eviction chose its rows, then another process made one of them fresh
    /// before its batch: the batch sees the commit, or the commit a look of
    /// the app's saw (`lookedBetween`), and eviction chooses again.
    @Test(arguments: [false, true])
    func evictionChoosesAgainAfterAnotherProcessCommits(lookedBetween: Bool) async throws {
        let date = ManualDate()
        let policy = RetentionPolicy(table: "note", keeping: [.maxAge(.seconds(30 * 86_400), by: "createdAt")])
        let retention = Retention(policies: [policy], batchSize: 500, clock: ManualClock())
        try await withNoteStore(retention: retention, date: date) { store in
            // Given 2,000 notes two months old
            try await store.insertNotes(2_000, createdAt: date.now.addingTimeInterval(-60 * 86_400))
            // and another process that, once the second batch has committed,
            // writes the last old note again as a fresh one
            let other = try DatabaseQueue(path: try #require(store.path))
            let now = date.now
            store.evictor?.afterBatch.withLock { hook in
                hook = { report in
                    guard report.batches == 2 else { return }
                    try? await other.write { db in
                        try db.execute(sql: "UPDATE note SET createdAt = ? WHERE id = 1999", arguments: [now])
                    }
                    if lookedBetween { _ = try? await store.refreshFromOtherProcesses() }
                }
            }

            // When the eviction runs
            let report = try await store.evict()

            // Then the fresh note stays
            #expect(report.rowsEvicted == ["note": 1_999])
            #expect(try await store.noteIDs() == [1_999])
            try other.close()
        }
    }

    /// The size budget's pass picked the oldest notes, then another process
    /// made the oldest of them fresh before the batch deleted them: the
    /// batch sees the commit and picks again, and the fresh note stays.
    @Test func theSizeBudgetPicksAgainAfterAnotherProcessCommits() async throws {
        let date = ManualDate()
        let policy = RetentionPolicy(table: "note", keeping: [.maxAge(.seconds(365 * 86_400), by: "createdAt")])
        try await withNoteStore(retention: Retention(policies: [policy], sizeBudget: 400_000, batchSize: 100), date: date) { store in
            // Given 2,000 notes of 1 KB, note i made i hours ago: the budget decides
            try await store.insert(Note.make(2_000, now: date.now, daysApart: 1.0 / 24, body: String(repeating: "x", count: 1_000)))
            // and another process that, once the first batch is picked,
            // writes the oldest note (1,999) again as a fresh one
            let other = try DatabaseQueue(path: try #require(store.path))
            let now = date.now
            let done = Mutex(false)
            store.evictor?.afterBudgetPicks.withLock { hook in
                hook = {
                    guard !done.withLock({ $0 }) else { return }
                    done.withLock { $0 = true }
                    try? await other.write { db in
                        try db.execute(sql: "UPDATE note SET createdAt = ? WHERE id = 1999", arguments: [now])
                    }
                }
            }

            // When the eviction runs
            _ = try await store.evict()

            // Then the fresh note stays, with the newest ones
            let ids = try await store.noteIDs()
            #expect(ids.last == 1_999)
            #expect(ids.dropLast() == ArraySlice(0..<(ids.count - 1)))
            try other.close()
        }
    }
}
