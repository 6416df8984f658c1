import Depot
import DepotTesting
import Foundation
import GRDB
import Logging
import Synchronization
import Testing
@testable import DepotStore

/// How eviction runs: in batches that let syncs in, seen by live results as
/// deletions, coalesced after syncs, and within a size budget.
@Suite(.timeLimit(.minutes(2))) struct EvictorTests {
    static let month: Int64 = 30 * 86_400

    /// The test: evicting 100,000 rows while a sync runs never holds
    /// the writer for more than one batch. Every committed transaction is
    /// counted (a GRDB transaction observer): none deletes more than the
    /// batch size, and the sync, started after the third batch, commits
    /// before the eviction goes on.
    @Test func aBigEvictionLetsASyncCommitBetweenBatches() async throws {
        let date = ManualDate()
        let policy = RetentionPolicy(table: "note", keeping: [.maxAge(.seconds(Self.month), by: "createdAt")])
        // The eviction the sync schedules waits on a clock that does not move.
        let retention = Retention(policies: [policy], batchSize: 500, clock: ManualClock())
        try await withNoteStore(retention: retention, date: date) { store in
            // Given 100,000 notes two months old
            try await store.insertNotes(100_000, createdAt: date.now.addingTimeInterval(-60 * 86_400))
            let log = CommitLog()
            store.writer.add(transactionObserver: log)

            // and a sync of ten fresh notes, run when the third batch has
            // committed, that also brings a fresh copy of the last old note
            // (the eviction chose it before the sync: it must choose again)
            let fresh = Note.make(10, from: 1_000_000, now: date.now, daysApart: 0) + [Note(id: 99_999, feed: "a", createdAt: date.now, rank: 99_999)]
            let transport = FixtureTransport(["/notes": .data(try notesJSON(fresh))])
            var configuration = NetworkController.Configuration(baseURL: URL(string: "http://notes.test")!, transport: transport, observability: .init(notificationCenter: nil))
            configuration.store = store
            let controller = NetworkController(configuration: configuration)
            let synced = Mutex<Int?>(nil)
            store.evictor?.afterBatch.withLock { hook in
                hook = { report in
                    guard report.batches == 3 else { return }
                    let written = try? await controller.perform(SyncNotes(url: URL(string: "http://notes.test/notes")!)).written
                    synced.withLock { $0 = written }
                }
            }

            // When the eviction runs
            let report = try await store.evict()

            // Then every old note went, in 200 batches of at most 500 rows
            #expect(synced.withLock { $0 } == 11)
            #expect(report.rowsEvicted == ["note": 99_999])
            #expect(report.batches == 200)
            #expect(try await store.noteIDs() == [99_999] + (1_000_000..<1_000_010))
            let commits = log.commits
            let deletions = commits.map(\.deleted)
            #expect(deletions.max() == 500, "the writer was held for \(deletions.max() ?? 0) deletions")
            // and the sync's commit lies between the third and the fourth batch
            let sync = try #require(commits.firstIndex { $0.inserted == 10 })
            #expect(sync == 3, "\(commits.prefix(6))")
            #expect(commits[..<sync].allSatisfy { $0.deleted == 500 && $0.inserted == 0 })
            #expect(commits[(sync + 1)...].count == 197)
            _ = await controller.shutdown(grace: .zero)
        }
    }

    @Test @MainActor func liveResultsSeeEvictionsAsDeletions() async throws {
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(10, newestBy: "rank")])
        try await withNoteStore(retention: Retention(policies: [policy], batchSize: 7)) { store in
            try await store.insert(Note.make(40, now: Date()))
            let results = try ResultsController(store: store, request: Note.order(Column("rank").desc))
            #expect(results.fetchedObjects.count == 40)
            var updates = results.updates().makeAsyncIterator()
            _ = await updates.next()   // the current snapshot

            let report = try await store.evict()
            #expect(report.batches == 5)

            // Batches may be coalesced, but every change set only deletes, and
            // the last one leaves the newest ten.
            var deleted = 0
            while let update = await updates.next() {
                let changes = try #require(update.changes)
                #expect(changes.inserted.isEmpty && changes.updated.isEmpty && changes.moved.isEmpty, "\(changes)")
                deleted += changes.deleted.count
                if update.snapshot.count == 10 { break }
            }
            #expect(deleted == 30)
            #expect(results.fetchedObjects.map(\.id) == Array((30..<40).reversed()))
        }
    }

    /// A successful sync schedules an eviction a moment later (on the
    /// retention's clock), without waiting for it; a burst of syncs runs one.
    @Test func aBurstOfSyncsRunsOneEvictionAfterTheDelay() async throws {
        let clock = ManualClock()
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(3, newestBy: "rank")])
        let retention = Retention(policies: [policy], delay: .seconds(2), clock: clock)
        try await withNoteStore(retention: retention) { store in
            let evictor = try #require(store.evictor)
            #expect(evictor.runs == 1)   // at launch
            let transport = FixtureTransport()
            var configuration = NetworkController.Configuration(baseURL: URL(string: "http://notes.test")!, transport: transport, observability: .init(notificationCenter: nil))
            configuration.store = store
            let controller = NetworkController(configuration: configuration)

            // When five syncs land, each with five more notes
            for batch in 0..<5 {
                transport.respond(to: "/notes", with: .data(try notesJSON(Note.make(5, from: batch * 5, now: Date()))))
                let update = try await controller.perform(SyncNotes(url: URL(string: "http://notes.test/notes")!))
                #expect(update.written == 5)
            }

            // Then nothing is evicted before the delay, and one eviction runs after it
            #expect(try await store.noteIDs().count == 25)
            #expect(evictor.runs == 1)
            try #require(evictor.isScheduled, "no sync scheduled an eviction")
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .seconds(2))
            await store.evictionIdle()
            #expect(evictor.runs == 2)
            #expect(try await store.noteIDs() == [22, 23, 24])
            _ = await controller.shutdown(grace: .zero)
        }
    }

    /// Nobody awaits a background eviction: when it fails, the retention's logger says so.
    @Test func aFailedBackgroundEvictionIsLoggedAsAnError() async throws {
        let clock = ManualClock()
        let log = LineLog()
        let logger = Logger(label: "test") { _ in log }
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(3, newestBy: "rank")])
        try await withNoteStore(retention: Retention(policies: [policy], clock: clock, logger: logger)) { store in
            #expect(log.lines.isEmpty, "the launch eviction succeeded")
            // Given the policy's table gone (a later migration dropped it)
            try await store.write { db in try db.execute(sql: "DROP TABLE note") }

            // When a sync's eviction runs
            store.scheduleEviction()
            await clock.sleepers(atLeast: 1)
            clock.advance(by: Retention.defaultDelay)
            await store.evictionIdle()

            // Then it is logged as an error, with the reason
            let logged = log.lines
            #expect(logged.count == 1)
            #expect(logged.first?.hasPrefix("error background eviction failed") == true)
            #expect(logged.first?.contains("note") == true, "\(logged)")
        }
    }

    @Test func aSizeBudgetEvictsTheOldestAndShrinksTheFile() async throws {
        let date = ManualDate()
        let budget = 400_000
        // The policy alone keeps a year: the budget decides.
        let policy = RetentionPolicy(table: "note", keeping: [.maxAge(.seconds(365 * 86_400), by: "createdAt")], protecting: "starred = 1")
        try await withNoteStore(retention: Retention(policies: [policy], sizeBudget: budget, batchSize: 100), date: date) { store in
            let mode = try await store.read { db in try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") }
            #expect(mode == 2)
            // Given 2,000 notes of 1 KB, note i made i hours ago, the oldest starred
            var notes = Note.make(2_000, now: date.now, daysApart: 1.0 / 24, body: String(repeating: "x", count: 1_000))
            notes[1_999].starred = true
            try await store.insert(notes)
            let before = try await store.read(Evictor.usedBytes)
            let pagesBefore = try await store.read { db in try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0 }
            #expect(before > 4 * budget)

            let report = try await store.evict()

            // Then the pages fit, the newest notes and the starred one stay,
            // and the file gave its pages back
            let after = try await store.read(Evictor.usedBytes)
            #expect(after <= budget)
            #expect(report.databaseSize == after)
            let ids = try await store.noteIDs()
            #expect(ids.last == 1_999)
            #expect(ids.dropLast() == ArraySlice(0..<(ids.count - 1)))
            #expect(ids.count > 100)
            let (pages, free) = try await store.read { db in
                (try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0, try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0)
            }
            #expect(free == 0)
            #expect(pages < pagesBefore / 3)
        }
    }

    @Test func aBudgetOnAnOlderFileTurnsOnIncrementalVacuumWithOneVacuum() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        do {
            let store = try Store(path: path, migrator: Note.migrator)
            try await store.insert(Note.make(10, now: Date()))
            #expect(try await store.read { db in try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") } == 0)
            try await store.close()
        }
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(100, newestBy: "rank")])
        let store = try Store(path: path, migrator: Note.migrator, retention: Retention(policies: [policy], sizeBudget: 1_000_000))
        #expect(try await store.read { db in try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") } == 2)
        #expect(try await store.noteIDs().count == 10)
        await store.evictionIdle()
    }
}

/// A log handler that keeps each line as "level message metadata".
private struct LineLog: LogHandler {
    private final class Lines: Sendable {
        let value = Mutex<[String]>([])
    }
    private let storage = Lines()
    var lines: [String] { storage.value.withLock { $0 } }
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let details = (event.metadata ?? [:]).map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
        storage.value.withLock { $0.append("\(event.level) \(event.message) \(details)") }
    }
}
