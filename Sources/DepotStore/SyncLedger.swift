import Depot
import Foundation
import GRDB

/// What the store remembers about each synced resource: when it last synced,
/// the last error, and the validators for conditional requests.
///
/// The ledger lives in the same database as the data, in a table of its own
/// (`depot_sync_ledger`), so a cold start with no network still knows "last
/// synced at T". A successful sync updates the ledger in the same transaction
/// as the data it wrote.
///
/// For example:
///
/// ```swift
/// if let entry = try await store.ledger.entry(for: "topsongs") {
///     print("last synced", entry.lastSynced ?? .distantPast)
/// }
/// ```
public struct SyncLedger: Sendable {
    let store: Store

    static let tableName = "depot_sync_ledger"

    /// One resource's sync record.
    public struct Entry: Sendable, Hashable {
        /// The resource key (see ``CachingOperation/cacheKey``).
        public var key: String
        /// When data last arrived or was confirmed fresh (a 304).
        public var lastSynced: Date?
        /// The last failure, cleared by the next success.
        public var lastError: SyncError?
        /// The `ETag` of the last full response.
        public var etag: String?
        /// The `Last-Modified` of the last full response.
        public var lastModified: String?
    }

    /// Creates the ledger table if needed. Called when a store opens.
    static func createTable(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(tableName) (
                key TEXT PRIMARY KEY NOT NULL,
                last_synced DOUBLE,
                error_code TEXT,
                error_message TEXT,
                error_date DOUBLE,
                etag TEXT,
                last_modified TEXT
            )
            """)
    }

    /// The entry for `key`, or `nil` if the resource never synced or failed.
    public func entry(for key: String) async throws(DepotError) -> Entry? {
        try await store.read { db in try Self.entry(for: key, in: db) }
    }

    /// Forgets `key`: its next sync is unconditional and `lastSynced` is `nil`.
    /// Use it when the app deletes the rows the entry describes.
    public func reset(_ key: String) async throws(DepotError) {
        try await store.write { db in
            try db.execute(sql: "DELETE FROM \(Self.tableName) WHERE key = ?", arguments: [key])
        }
    }

    /// Records a failure. The data and validators stay as they were.
    public func recordFailure(_ error: DepotError, for key: String) async {
        let date = store.currentDate()
        // Best effort: failing to record a failure must not hide the failure itself.
        try? await store.write { db in try Self.recordFailure(error, for: key, at: date, in: db) }
    }

    // MARK: - Inside a transaction

    /// The entry for `key`, read in `db`.
    public static func entry(for key: String, in db: Database) throws -> Entry? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(tableName) WHERE key = ?", arguments: [key]) else { return nil }
        return Entry(row: row)
    }

    /// Records a success in `db`: `lastSynced` becomes `date`, the error is cleared,
    /// and the validators are replaced by `validators` (or kept, for a 304).
    static func recordSuccess(for key: String, at date: Date, validators: Validators?, in db: Database) throws {
        if let validators {
            try db.execute(
                sql: """
                    INSERT INTO \(tableName) (key, last_synced, etag, last_modified) VALUES (?, ?, ?, ?)
                    ON CONFLICT(key) DO UPDATE SET last_synced = excluded.last_synced,
                        error_code = NULL, error_message = NULL, error_date = NULL,
                        etag = excluded.etag, last_modified = excluded.last_modified
                    """,
                arguments: [key, date.timeIntervalSince1970, validators.etag, validators.lastModified])
        } else {
            try db.execute(
                sql: """
                    INSERT INTO \(tableName) (key, last_synced) VALUES (?, ?)
                    ON CONFLICT(key) DO UPDATE SET last_synced = excluded.last_synced,
                        error_code = NULL, error_message = NULL, error_date = NULL
                    """,
                arguments: [key, date.timeIntervalSince1970])
        }
    }

    static func recordFailure(_ error: DepotError, for key: String, at date: Date, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO \(tableName) (key, error_code, error_message, error_date) VALUES (?, ?, ?, ?)
                ON CONFLICT(key) DO UPDATE SET error_code = excluded.error_code,
                    error_message = excluded.error_message, error_date = excluded.error_date
                """,
            arguments: [key, error.code.rawValue, error.description, date.timeIntervalSince1970])
    }
}

/// A sync failure as the ledger keeps it: enough to show, and to survive a restart.
public struct SyncError: Sendable, Hashable, CustomStringConvertible {
    /// The error's code, when it is one this version of Depot knows.
    public var code: DepotError.Code?
    /// The full message, as ``Depot/DepotError/description`` gave it.
    public var message: String
    /// When it happened.
    public var date: Date

    /// Makes a sync error.
    public init(code: DepotError.Code?, message: String, date: Date) {
        self.code = code
        self.message = message
        self.date = date
    }

    public var description: String { message }
}

/// The validators of a response, for conditional requests.
struct Validators: Sendable, Hashable {
    var etag: String?
    var lastModified: String?

    init(etag: String?, lastModified: String?) {
        self.etag = etag
        self.lastModified = lastModified
    }

    init(_ headers: HeaderFields) {
        self.init(etag: headers["ETag"], lastModified: headers["Last-Modified"])
    }
}

extension SyncLedger.Entry {
    init(row: Row) {
        key = row["key"]
        lastSynced = (row["last_synced"] as Double?).map(Date.init(timeIntervalSince1970:))
        if let message: String = row["error_message"] {
            let code: String? = row["error_code"]
            let date: Double? = row["error_date"]
            lastError = SyncError(code: code.flatMap(DepotError.Code.init(rawValue:)), message: message, date: Date(timeIntervalSince1970: date ?? 0))
        }
        etag = row["etag"]
        lastModified = row["last_modified"]
    }
}
