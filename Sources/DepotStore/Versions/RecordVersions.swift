import Depot
import Foundation
import GRDB

/// The server's versions of single records, kept in the store (table
/// `depot_record_versions`) so that edits can say which version they were
/// based on, and so that the cache never goes back to an older one.
///
/// An operation or a mutation that writes a record it has a version for calls
/// ``admit(_:for:in:)`` in the same transaction, and writes the record only if
/// it returns `true`. The call keeps the newest version, so a refresh served
/// by a lagging replica after the user's own write (version 4 after the
/// commit of version 5) leaves the cached row as it is: read-your-writes.
///
/// ```swift
/// func write(_ contacts: [Contact], to db: Database) throws {
///     for contact in contacts where try RecordVersions.admit(RecordVersion(contact.version), for: RecordKey("contact", contact.id), in: db) {
///         try contact.upsert(db)
///     }
/// }
/// ```
///
/// An edit reads the version it is based on with ``version(of:in:)``, and
/// sends it as `If-Match` (``Mutation/baseVersion``).
public enum RecordVersions {
    static let tableName = "depot_record_versions"

    static func createTable(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(tableName) (
                kind TEXT NOT NULL,
                id TEXT NOT NULL,
                entityTag TEXT NOT NULL,
                counter INTEGER,
                PRIMARY KEY (kind, id)
            ) WITHOUT ROWID
            """)
    }

    /// The version the cache holds of `record`, or `nil` if none was kept.
    public static func version(of record: RecordKey, in db: Database) throws -> RecordVersion? {
        guard let row = try Row.fetchOne(db, sql: "SELECT entityTag, counter FROM \(tableName) WHERE kind = ? AND id = ?", arguments: [record.kind, record.id]) else {
            return nil
        }
        return RecordVersion(entityTag: row["entityTag"], counter: row["counter"])
    }

    /// Whether a copy of `record` at `version` may be written into the cache:
    /// `false` if the cache holds a newer version (``RecordVersion/isOlder(than:)``),
    /// and then the caller leaves the cached row as it is. Otherwise keeps
    /// `version` as the record's and returns `true`. A `nil` version (the
    /// server gave none) is admitted and keeps what is known.
    @discardableResult
    public static func admit(_ version: RecordVersion?, for record: RecordKey, in db: Database) throws -> Bool {
        guard let version else { return true }
        if let kept = try self.version(of: record, in: db) {
            if version.isOlder(than: kept) { return false }
            if kept == version { return true }
        }
        try db.execute(
            sql: "INSERT OR REPLACE INTO \(tableName) (kind, id, entityTag, counter) VALUES (?, ?, ?, ?)",
            arguments: [record.kind, record.id, version.entityTag, version.counter])
        return true
    }

    /// Forgets the version of `record` (it was deleted).
    public static func forget(_ record: RecordKey, in db: Database) throws {
        try db.execute(sql: "DELETE FROM \(tableName) WHERE kind = ? AND id = ?", arguments: [record.kind, record.id])
    }
}

extension RecordVersion {
    /// A version as the table keeps it.
    init(entityTag: String, counter: Int64?) {
        self.init(entityTag: entityTag)
        self.counter = counter
    }
}
