import Depot
import DepotTesting
import Foundation
import GRDB
import Synchronization
@testable import DepotStore

/// The record the retention tests use: a note of a feed, with a date, a rank
/// and the flags a protecting predicate reads.
struct Note: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    var id: Int
    var feed: String
    var createdAt: Date
    var rank: Int
    var isRead = false
    var starred = false
    var body = ""

    static let databaseTableName = "note"

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        registerMigration(in: &migrator)
        return migrator
    }

    /// Adds the note table's migration to `migrator`.
    static func registerMigration(in migrator: inout DatabaseMigrator) {
        migrator.registerMigration("notes") { db in
            try db.create(table: "note") { t in
                t.primaryKey("id", .integer)
                t.column("feed", .text).notNull()
                t.column("createdAt", .datetime).notNull()
                t.column("rank", .integer).notNull()
                t.column("isRead", .boolean).notNull().defaults(to: false)
                t.column("starred", .boolean).notNull().defaults(to: false)
                t.column("body", .text).notNull().defaults(to: "")
            }
        }
    }

    /// `count` notes from id `first`, spread over `feeds`, note `i` made `i` days before `now`.
    static func make(_ count: Int, from first: Int = 0, feeds: [String] = ["a"], now: Date, daysApart: Double = 1, body: String = "") -> [Note] {
        (first..<first + count).map { i in
            Note(id: i, feed: feeds[i % feeds.count], createdAt: now.addingTimeInterval(-Double(i - first) * daysApart * 86_400), rank: i, body: body)
        }
    }
}

extension Store {
    /// Inserts `notes` in one transaction.
    func insert(_ notes: [Note]) async throws {
        try await write { db in
            for note in notes { try note.insert(db) }
        }
    }

    /// Inserts notes `0..<count` of feed "a", all made at `createdAt`, in one
    /// transaction through one prepared statement (fast for 100,000).
    func insertNotes(_ count: Int, createdAt: Date) async throws {
        try await write { db in
            let statement = try db.makeStatement(sql: "INSERT INTO note (id, feed, createdAt, rank) VALUES (?, 'a', ?, ?)")
            for id in 0..<count { try statement.execute(arguments: [id, createdAt, id]) }
        }
    }

    /// The ids of every note, ascending.
    func noteIDs() async throws -> [Int] {
        try await read { db in try Int.fetchAll(db, sql: "SELECT id FROM note ORDER BY id") }
    }
}

/// Opens a store on a new file in a new temporary folder; the folder goes when `body` returns.
func withNoteStore<T>(
    retention: Retention?,
    date: ManualDate = ManualDate(),
    clock: any Clock<Duration> = ContinuousClock(),
    isolation: isolated (any Actor)? = #isolation,
    _ body: (Store) async throws -> T
) async throws -> T {
    let folder = try temporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: Note.migrator, retention: retention, environment: .init(clock: clock, date: date.provider))
    // The launch eviction of an empty table: let it end before the test writes.
    await store.evictionIdle()
    return try await body(store)
}

/// Records, for each committed transaction, how many notes it deleted and inserted.
final class CommitLog: TransactionObserver, Sendable {
    struct Commit: Sendable, Equatable {
        var deleted = 0
        var inserted = 0
    }

    private let state = Mutex((current: Commit(), commits: [Commit]()))

    var commits: [Commit] { state.withLock { $0.commits } }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        eventKind.tableName == "note"
    }

    func databaseDidChange(with event: DatabaseEvent) {
        state.withLock { state in
            switch event.kind {
            case .delete: state.current.deleted += 1
            case .insert: state.current.inserted += 1
            case .update: break
            }
        }
    }

    func databaseDidCommit(_ db: Database) {
        state.withLock { state in
            if state.current != Commit() { state.commits.append(state.current) }
            state.current = Commit()
        }
    }

    func databaseDidRollback(_ db: Database) {
        state.withLock { $0.current = Commit() }
    }
}

/// A sync of notes: fetches a JSON array and upserts it, through `CachingOperation`.
struct SyncNotes: CachingOperation {
    var url: URL
    var key = "notes"

    var request: NetworkRequest { .get(url) }
    var cacheKey: String { key }

    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Note] {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return try decoder.decode([Note].self, from: response.body)
    }

    func write(_ notes: [Note], to db: Database) throws -> Int {
        for note in notes { try note.upsert(db) }
        return notes.count
    }
}

/// The JSON a ``SyncNotes`` reads.
func notesJSON(_ notes: [Note]) throws -> Data {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .secondsSince1970
    return try encoder.encode(notes)
}
