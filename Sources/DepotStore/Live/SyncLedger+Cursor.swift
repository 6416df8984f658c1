import Depot
import Foundation
import GRDB

/// A change feed's cursor, kept in the ledger per sync key (table
/// `depot_sync_cursors`), and written only in the transaction that applies
/// the changes up to it.
extension SyncLedger {
    static let cursorsTable = "depot_sync_cursors"

    static func createCursorsTable(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(cursorsTable) (
                key TEXT PRIMARY KEY NOT NULL,
                cursor TEXT NOT NULL,
                applied INTEGER NOT NULL DEFAULT 0
            )
            """)
    }

    /// The cursor of the change feed kept under `key`, or `nil` before its
    /// first full sync (or after ``reset(_:)``).
    public func cursor(for key: String) async throws(DepotError) -> String? {
        try await store.read { db in try Self.cursor(for: key, in: db) }
    }

    /// The cursor kept under `key`, read at once: a feed's driver decides
    /// with it what comes next, and must not leave the actor while it does.
    func currentCursor(for key: String) throws(DepotError) -> String? {
        do {
            return try store.writer.read { db in try Self.cursor(for: key, in: db) }
        } catch {
            throw DepotError.storage(error, detail: "reading the cursor of \(key) failed")
        }
    }

    /// The cursor kept under `key`, read in `db`.
    public static func cursor(for key: String, in db: Database) throws -> String? {
        try String.fetchOne(db, sql: "SELECT cursor FROM \(cursorsTable) WHERE key = ?", arguments: [key])
    }

    /// How many changes the feed under `key` applied, ever (a full sync's
    /// rows not included).
    public func appliedChanges(for key: String) async throws(DepotError) -> Int {
        try await store.read { db in
            try Int.fetchOne(db, sql: "SELECT applied FROM \(Self.cursorsTable) WHERE key = ?", arguments: [key]) ?? 0
        }
    }

    /// Moves the cursor of `key` to `cursor`, in `db`, counting `applied` changes.
    static func setCursor(_ cursor: String, for key: String, applied: Int, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO \(cursorsTable) (key, cursor, applied) VALUES (?, ?, ?)
                ON CONFLICT(key) DO UPDATE SET cursor = excluded.cursor, applied = applied + excluded.applied
                """,
            arguments: [key, cursor, applied])
    }
}
