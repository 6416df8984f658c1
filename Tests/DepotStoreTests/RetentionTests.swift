import Depot
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// What each retention rule keeps and evicts, on a real store file.
@Suite(.timeLimit(.minutes(1))) struct RetentionTests {
    static let day: Int64 = 86_400

    @Test func maxAgeEvictsRowsOlderThanTheAgeByTheStoresDate() async throws {
        let date = ManualDate()
        let policy = RetentionPolicy(table: "note", keeping: [.maxAge(.seconds(10 * Self.day), by: "createdAt")])
        try await withNoteStore(retention: Retention(policies: [policy]), date: date) { store in
            // Given notes made 0, 1, … 19 days ago
            try await store.insert(Note.make(20, now: date.now, daysApart: 1))

            // When eviction runs now, and again 5 days later
            let first = try await store.evict()
            #expect(first.rowsEvicted == ["note": 9])
            #expect(try await store.noteIDs() == Array(0...10))
            date.advance(by: 5 * 86_400)
            _ = try await store.evict()

            // Then only the notes at most 10 days old stay
            #expect(try await store.noteIDs() == Array(0...5))
        }
    }

    @Test func maxCountKeepsTheNewestPerPartition() async throws {
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(3, newestBy: "rank", per: "feed")])
        try await withNoteStore(retention: Retention(policies: [policy])) { store in
            // Given ten notes in each of three feeds, ranked by id
            try await store.insert(Note.make(30, feeds: ["a", "b", "c"], now: Date()))

            let report = try await store.evict()

            // Then each feed keeps its three highest ranks
            #expect(report.rowsEvicted == ["note": 21])
            #expect(try await store.noteIDs() == [21, 22, 23, 24, 25, 26, 27, 28, 29])
        }
    }

    /// A million-row feed within its count was ranked and sorted whole on
    /// every eviction (2 s of a 7 s sync): within their counts, tables are not ranked.
    @Test(arguments: [nil, "feed"]) func countRulesWithinTheirCountsRankNothing(partition: String?) async throws {
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(10, newestBy: "rank", per: partition)])
        try await withNoteStore(retention: Retention(policies: [policy])) { store in
            // Given 10 notes in each of two feeds: within the count per feed, and 10 rows over it for the table
            try await store.insert(Note.make(partition == nil ? 10 : 20, feeds: ["a", "b"], now: Date()))
            let (quiet, ranked) = try await store.read { db in
                let plan = try EvictionPlan.resolve(policy, in: db)
                let statements = Mutex<[String]>([])
                db.trace(options: .statement) { event in statements.withLock { $0.append(event.description) } }
                defer { db.trace(options: []) }
                let quiet = try plan.candidates(in: db, now: Date())
                let ranks = statements.withLock { $0.filter { $0.contains("ROW_NUMBER") }.count }
                return (quiet, ranks)
            }
            #expect(quiet.isEmpty)
            #expect(ranked == 0)

            // When one more note passes the count, the rows are ranked and the oldest goes
            try await store.insert(Note.make(1, from: 100, feeds: ["a"], now: Date()))
            #expect(try await store.evict().rowsEvicted == ["note": 1])
            #expect(try await !store.noteIDs().contains(0))
        }
    }

    @Test func maxCountWithoutAPartitionKeepsTheNewestOfTheTable() async throws {
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(4, newestBy: "createdAt")])
        try await withNoteStore(retention: Retention(policies: [policy])) { store in
            // Note i is i days old: the newest are the lowest ids.
            try await store.insert(Note.make(10, feeds: ["a", "b"], now: Date()))
            _ = try await store.evict()
            #expect(try await store.noteIDs() == [0, 1, 2, 3])
        }
    }

    @Test @MainActor func whileReferencedByResultsKeepsWhatLiveResultsShow() async throws {
        let policy = RetentionPolicy(table: "note", keeping: [.whileReferenced(by: .results)])
        try await withNoteStore(retention: Retention(policies: [policy])) { store in
            try await store.insert(Note.make(10, feeds: ["a", "b"], now: Date()))
            // Given results that show feed a's notes
            var results: ResultsController<Note>? = try ResultsController(store: store, request: Note.filter(Column("feed") == "a").order(Column("id")))
            #expect(results?.fetchedObjects.count == 5)

            // When eviction runs, only the rows on screen stay
            _ = try await store.evict()
            #expect(try await store.noteIDs() == [0, 2, 4, 6, 8])

            // And once the results are gone, nothing refers to them
            results = nil
            _ = try await store.evict()
            #expect(try await store.noteIDs() == [])
        }
    }

    @Test func whileReferencedBySyncKeyKeepsTheRowsOfKeysInTheLedger() async throws {
        let policy = RetentionPolicy(table: "note", keeping: [.whileReferenced(by: .syncKey(in: "feed"))])
        try await withNoteStore(retention: Retention(policies: [policy])) { store in
            try await store.insert(Note.make(9, feeds: ["a", "b", "c"], now: Date()))
            // Given feeds a and b in the ledger, c not
            try await store.write { db in
                try SyncLedger.recordSuccess(for: "a", at: Date(), validators: nil, in: db)
                try SyncLedger.recordSuccess(for: "b", at: Date(), validators: nil, in: db)
            }

            _ = try await store.evict()
            #expect(try await store.noteIDs() == [0, 1, 3, 4, 6, 7])

            // When the app forgets feed b, its rows go too
            try await store.ledger.reset("b")
            _ = try await store.evict()
            #expect(try await store.noteIDs() == [0, 3, 6])
        }
    }

    @Test func theProtectingPredicateKeepsRowsEveryRuleWouldEvict() async throws {
        let policy = RetentionPolicy(
            table: "note",
            keeping: [.maxCount(2, newestBy: "rank"), .maxAge(.seconds(Self.day), by: "createdAt")],
            protecting: "isRead = 1 OR starred = 1")
        let date = ManualDate()
        try await withNoteStore(retention: Retention(policies: [policy]), date: date) { store in
            var notes = Note.make(10, now: date.now)
            notes[0].isRead = true      // the oldest by rank, and new
            notes[7].starred = true     // old by both rules
            try await store.insert(notes)

            _ = try await store.evict()

            // The count rule keeps 8 and 9, the age rule 0 and 1: a row goes
            // when any rule takes it, so only the protected notes stay.
            #expect(try await store.noteIDs() == [0, 7])
        }
    }

    @Test func rowsOfPendingOutboxWritesAreNeverEvicted() async throws {
        let policy = RetentionPolicy(table: "note", keeping: [.maxCount(0, newestBy: "rank")])
        try await withNoteStore(retention: Retention(policies: [policy])) { store in
            try await store.insert(Note.make(6, now: Date()))
            // Given a mark-as-read of note 3 that cannot be delivered (the server answers 503)
            let transport = FixtureTransport()
            transport.respondToOtherPaths(with: .status(503))
            var configuration = NetworkController.Configuration(baseURL: URL(string: "http://notes.test")!, transport: transport, observability: .init(notificationCenter: nil))
            configuration.store = store
            let controller = NetworkController(configuration: configuration)
            let outbox = Outbox(store: store, controller: controller, types: [MarkRead.self], waitsForNetwork: false)
            try await outbox.send(MarkRead(payload: 3))
            await outbox.waitUntilIdle()
            #expect(try await outbox.entries().count == 1)

            // When eviction takes every row
            _ = try await store.evict()

            // Then the row the pending write needs stays, until the write is gone
            #expect(try await store.noteIDs() == [3])
            try await outbox.discard(try #require(try await outbox.entries().first).id)
            _ = try await store.evict()
            #expect(try await store.noteIDs() == [])
            _ = await controller.shutdown(grace: .zero)
        }
    }

    @Test func anInvalidPolicyFailsTheOpenWithASentence() async throws {
        let cases: [(RetentionPolicy, String)] = [
            (RetentionPolicy(table: "notes", keeping: [.maxCount(1, newestBy: "rank")]), "the retention policy for table notes names a table that does not exist"),
            (RetentionPolicy(table: "note", keeping: [.maxAge(.seconds(1), by: "created")]), "names a date column created, which the table does not have"),
            (RetentionPolicy(table: "note", keeping: [.maxCount(1, newestBy: "rank", per: "folder")]), "names a partition column folder"),
            (RetentionPolicy(table: "note", keeping: [.maxCount(-1, newestBy: "rank")]), "keeps at most -1 rows, which is negative"),
            (RetentionPolicy(table: "note", keeping: [.maxCount(1, newestBy: "rank")], protecting: "isRaed = 1"), "protects rows with `isRaed = 1`, which SQLite cannot read"),
        ]
        for (policy, message) in cases {
            let folder = try temporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let error = #expect(throws: DepotError.self) {
                try Store(path: folder.appending(path: "cache.sqlite").path, migrator: Note.migrator, retention: Retention(policies: [policy]))
            }
            #expect(error?.code == .storage)
            #expect(error?.description.contains(message) == true, "\(String(describing: error))")
        }
    }
}

/// Marks a note read on the server; it needs its row until it is delivered.
struct MarkRead: Mutation {
    static let typeName = "MarkRead"
    var payload: Int
    init(payload: Int) { self.payload = payload }
    var request: NetworkRequest { .post("notes/\(payload)/read", json: ["read": true]) }
    var retainedRows: [RetainedRow] { [RetainedRow(table: "note", key: payload)] }
    func applyOptimistically(_ db: Database) throws {
        try db.execute(sql: "UPDATE note SET isRead = 1 WHERE id = ?", arguments: [payload])
    }
    func commit(_ response: NetworkResponse, _ db: Database) throws {}
    func rollback(_ error: DepotError, _ db: Database) throws {}
}
