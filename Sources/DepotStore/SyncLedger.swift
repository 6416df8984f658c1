import Depot
import Foundation
import GRDB

/// What the store remembers about each synced resource: when it last synced,
/// the last error, whether it was invalidated, its tags, and the validators
/// for conditional requests.
///
/// The ledger lives in the same database as the data, in tables of its own
/// (`depot_sync_ledger`, `depot_sync_tags`, `depot_validators`), so a cold
/// start with no network still knows "last synced at T". A successful sync
/// updates the ledger in the same transaction as the data it wrote.
///
/// Validators (`ETag`, `Last-Modified`) are kept per request URL, not per
/// key: one key fetched with different parameters never sends one URL's
/// validator to another, so it never gets a wrong 304.
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
    static let tagsTable = "depot_sync_tags"
    static let validatorsTable = "depot_validators"

    /// One resource's sync record.
    public struct Entry: Sendable, Hashable {
        /// The resource key (see ``CachingOperation/cacheKey``).
        public var key: String
        /// When data last arrived or was confirmed fresh (a 304).
        public var lastSynced: Date?
        /// The last failure, cleared by the next success.
        public var lastError: SyncError?
        /// The `ETag` of the last full response (conditional requests use the
        /// validators kept for each request URL).
        public var etag: String?
        /// The `Last-Modified` of the last full response.
        public var lastModified: String?
        /// Whether the resource was invalidated since it last synced: a
        /// ``CachePolicy/cacheFirst(maxAge:)`` read refetches it whatever its age.
        public var isStale = false
        /// How many times the resource was invalidated, ever: a live
        /// ``SyncStatus`` refreshes once for each new invalidation it sees.
        var invalidations = 0
        /// Until when the last response (or 304) said the resource is fresh
        /// (`max-age`, `Expires`; see ``CachePolicy/cacheFirst``), or `nil`
        /// when it said nothing about freshness, or `no-store`.
        public var freshUntil: Date?
        /// Until when, past ``freshUntil``, the last response allowed the
        /// cached rows to be shown while a refresh runs in the background
        /// (`stale-while-revalidate`), or `nil` for no such window.
        public var staleWhileRevalidateUntil: Date?
    }

    /// Whether the ledger's tables are in place, as this version of Depot keeps them.
    static func isCurrent(_ db: Database) throws -> Bool {
        try db.tableExists(validatorsTable) && db.tableExists(cursorsTable) && hasFreshnessColumns(db)
    }

    /// Creates the ledger's tables, or brings an older ledger up to date.
    /// Called when a store opens. The validators an older ledger kept per key
    /// are not carried over: its next sync of each key is unconditional.
    static func createTable(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(tableName) (
                key TEXT PRIMARY KEY NOT NULL,
                last_synced DOUBLE,
                error_code TEXT,
                error_message TEXT,
                error_date DOUBLE,
                etag TEXT,
                last_modified TEXT,
                stale INTEGER NOT NULL DEFAULT 0,
                invalidations INTEGER NOT NULL DEFAULT 0
            )
            """)
        let columns = Set(try db.columns(in: tableName).map(\.name))
        for column in ["stale", "invalidations"] where !columns.contains(column) {
            try db.execute(sql: "ALTER TABLE \(tableName) ADD COLUMN \(column) INTEGER NOT NULL DEFAULT 0")
        }
        try addFreshnessColumns(db)
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(tagsTable) (
                key TEXT NOT NULL,
                tag TEXT NOT NULL,
                PRIMARY KEY (tag, key)
            ) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS \(validatorsTable) (
                url TEXT PRIMARY KEY NOT NULL,
                key TEXT NOT NULL,
                etag TEXT,
                last_modified TEXT
            );
            CREATE INDEX IF NOT EXISTS \(validatorsTable)_key ON \(validatorsTable)(key);
            """)
        try createCursorsTable(db)
    }

    /// The entry for `key`, or `nil` if the resource never synced or failed.
    public func entry(for key: String) async throws(DepotError) -> Entry? {
        try await store.read { db in try Self.entry(for: key, in: db) }
    }

    /// Forgets `key`: its next sync is unconditional and `lastSynced` is `nil`;
    /// a change feed kept under it starts over with a full sync.
    /// Use it when the app deletes the rows the entry describes.
    public func reset(_ key: String) async throws(DepotError) {
        try await store.write { db in
            try db.execute(sql: "DELETE FROM \(Self.tableName) WHERE key = ?", arguments: [key])
            try db.execute(sql: "DELETE FROM \(Self.cursorsTable) WHERE key = ?", arguments: [key])
            try db.execute(sql: "DELETE FROM \(Self.tagsTable) WHERE key = ?", arguments: [key])
            try db.execute(sql: "DELETE FROM \(Self.validatorsTable) WHERE key = ?", arguments: [key])
        }
    }

    /// Marks the entries `targets` name as stale, in one transaction: the next
    /// ``CachePolicy/cacheFirst(maxAge:)`` read of each refetches it whatever
    /// its age, and every live ``SyncStatus`` of one (the results on screen)
    /// refreshes at once, once, however many targets name it.
    ///
    /// For example, after a write the app made outside the outbox:
    ///
    /// ```swift
    /// try await store.ledger.invalidate(.tag("tasks"), .key("senbei:activities"))
    /// ```
    ///
    /// A key that never synced has no entry and nothing to mark: its first
    /// read fetches anyway. To invalidate when a ``Mutation`` succeeds, list
    /// the targets in its ``Mutation/invalidates``.
    ///
    /// - Returns: How many entries were marked.
    @discardableResult
    public func invalidate(_ targets: CacheInvalidation...) async throws(DepotError) -> Int {
        try await store.write { db in try Self.invalidate(targets, in: db) }
    }

    /// Marks the entries `targets` name as stale, inside a transaction of
    /// the caller's (a mutation's commit, an operation's `write`).
    ///
    /// - Returns: How many entries were marked.
    @discardableResult
    public static func invalidate(_ targets: [CacheInvalidation], in db: Database) throws -> Int {
        var marked = 0
        let update = "UPDATE \(tableName) SET stale = 1, invalidations = invalidations + 1"
        for target in targets {
            switch target.kind {
            case .key(let key):
                try db.execute(sql: "\(update) WHERE key = ?", arguments: [key])
            case .keyPrefix(let prefix):
                try db.execute(sql: "\(update) WHERE substr(key, 1, length(?1)) = ?1", arguments: [prefix])
            case .tag(let tag):
                try db.execute(sql: "\(update) WHERE key IN (SELECT key FROM \(tagsTable) WHERE tag = ?)", arguments: [tag])
            }
            marked += db.changesCount
        }
        return marked
    }

    /// Records a failure. The data and validators stay as they were.
    public func recordFailure(_ error: DepotError, for key: String) async {
        await recordedFailure(error, for: key)
    }

    /// Records a failure, best effort: failing to record a failure must not
    /// hide the failure itself.
    /// - Returns: Whether it was recorded (a full disk may refuse even that).
    @discardableResult
    func recordedFailure(_ error: DepotError, for key: String) async -> Bool {
        let date = store.currentDate()
        do {
            try await store.write { db in try Self.recordFailure(error, for: key, at: date, in: db) }
            return true
        } catch {
            return false
        }
    }

    // MARK: - Inside a transaction

    /// The entry for `key`, read in `db`.
    public static func entry(for key: String, in db: Database) throws -> Entry? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(tableName) WHERE key = ?", arguments: [key]) else { return nil }
        return Entry(row: row)
    }

    /// Records a success in `db`: `lastSynced` becomes `date`, the error and
    /// the stale mark are cleared, and the validators are replaced by
    /// `validators` (or kept, for a 304). With a `url`, the validators are
    /// also kept for that URL, the one conditional requests read.
    static func recordSuccess(for key: String, at date: Date, validators: Validators?, url: String? = nil, in db: Database) throws {
        if let validators {
            try db.execute(
                sql: """
                    INSERT INTO \(tableName) (key, last_synced, etag, last_modified) VALUES (?, ?, ?, ?)
                    ON CONFLICT(key) DO UPDATE SET last_synced = excluded.last_synced,
                        error_code = NULL, error_message = NULL, error_date = NULL, stale = 0,
                        etag = excluded.etag, last_modified = excluded.last_modified
                    """,
                arguments: [key, date.timeIntervalSince1970, validators.etag, validators.lastModified])
            if let url {
                if validators.etag == nil, validators.lastModified == nil {
                    try db.execute(sql: "DELETE FROM \(validatorsTable) WHERE url = ?", arguments: [url])
                } else {
                    try db.execute(
                        sql: """
                            INSERT INTO \(validatorsTable) (url, key, etag, last_modified) VALUES (?, ?, ?, ?)
                            ON CONFLICT(url) DO UPDATE SET key = excluded.key, etag = excluded.etag, last_modified = excluded.last_modified
                            """,
                        arguments: [url, key, validators.etag, validators.lastModified])
                }
            }
        } else {
            try db.execute(
                sql: """
                    INSERT INTO \(tableName) (key, last_synced) VALUES (?, ?)
                    ON CONFLICT(key) DO UPDATE SET last_synced = excluded.last_synced,
                        error_code = NULL, error_message = NULL, error_date = NULL, stale = 0
                    """,
                arguments: [key, date.timeIntervalSince1970])
        }
    }

    /// Replaces the tags of `key` with `tags`.
    static func setTags(_ tags: Set<String>, for key: String, in db: Database) throws {
        try db.execute(sql: "DELETE FROM \(tagsTable) WHERE key = ?", arguments: [key])
        for tag in tags {
            try db.execute(sql: "INSERT INTO \(tagsTable) (key, tag) VALUES (?, ?)", arguments: [key, tag])
        }
    }

    /// The validators kept for `url`, if its last full response had any.
    static func validators(for url: String, in db: Database) throws -> Validators? {
        guard let row = try Row.fetchOne(db, sql: "SELECT etag, last_modified FROM \(validatorsTable) WHERE url = ?", arguments: [url]) else { return nil }
        return Validators(etag: row["etag"], lastModified: row["last_modified"])
    }

    /// How a request URL is kept in the validators table: the values of
    /// secret query parameters (``/Depot/Redaction/default``) are left out,
    /// so that tokens never reach the cache file.
    static func validatorKey(for url: URL) -> String {
        Redaction.default.url(url)
    }

    static func recordFailure(_ error: DepotError, for key: String, at date: Date, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO \(tableName) (key, error_code, error_message, error_date) VALUES (?, ?, ?, ?)
                ON CONFLICT(key) DO UPDATE SET error_code = excluded.error_code,
                    error_message = excluded.error_message, error_date = excluded.error_date
                """,
            arguments: [key, SyncError.storedCode(of: error), error.description, date.timeIntervalSince1970])
    }
}

/// A sync failure as the ledger keeps it: enough to show, and to survive a restart.
///
/// ``message`` is the technical sentence, for logs; an app words ``code``,
/// ``status`` and ``storageProblem`` for people.
public struct SyncError: Sendable, Hashable, CustomStringConvertible {
    /// The error's code, when it is one this version of Depot knows.
    public var code: DepotError.Code?
    /// The full message, as ``/Depot/DepotError/description`` gave it.
    public var message: String
    /// When it happened.
    public var date: Date
    /// The HTTP status the server answered, when the failure was an answer.
    public var status: Int?
    /// What kept the store from taking the sync, when that was the failure
    /// (see ``/Depot/DepotError/storageProblem``).
    public var storageProblem: DepotError.StorageProblem?

    /// Makes a sync error.
    ///
    /// - Parameters:
    ///   - code: The error's code.
    ///   - message: The technical sentence, for logs.
    ///   - date: When it happened.
    ///   - status: The HTTP status, when the server answered.
    ///   - storageProblem: The storage problem, when the store failed.
    public init(code: DepotError.Code?, message: String, date: Date, status: Int? = nil, storageProblem: DepotError.StorageProblem? = nil) {
        self.code = code
        self.message = message
        self.date = date
        self.status = status
        self.storageProblem = storageProblem
    }

    /// The sync error that `error` is, at `date`.
    init(_ error: DepotError, date: Date) {
        self.init(code: error.code, message: error.description, date: date, status: error.status, storageProblem: error.storageProblem)
    }

    public var description: String { message }

    /// How the ledger's `error_code` column keeps the code with what
    /// refines it: "server/503", "storage/diskFull", or the code alone. A
    /// Depot that does not know the refinement reads no code, and shows the message.
    static func storedCode(of error: DepotError) -> String {
        if let problem = error.storageProblem { return "\(error.code.rawValue)/\(problem.rawValue)" }
        if let status = error.status { return "\(error.code.rawValue)/\(status)" }
        return error.code.rawValue
    }

    /// Reads back what ``storedCode(of:)`` wrote.
    init(storedCode: String?, message: String, date: Date) {
        let parts = storedCode?.split(separator: "/", maxSplits: 1).map(String.init) ?? []
        let refinement = parts.count > 1 ? parts[1] : nil
        self.init(
            code: parts.first.flatMap(DepotError.Code.init(rawValue:)),
            message: message,
            date: date,
            status: refinement.flatMap { Int($0) },
            storageProblem: refinement.flatMap(DepotError.StorageProblem.init(rawValue:)))
    }
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
            lastError = SyncError(storedCode: code, message: message, date: Date(timeIntervalSince1970: date ?? 0))
        }
        etag = row["etag"]
        lastModified = row["last_modified"]
        isStale = (row["stale"] as Int?) ?? 0 != 0
        invalidations = row["invalidations"] ?? 0
        freshUntil = (row["fresh_until"] as Double?).map(Date.init(timeIntervalSince1970:))
        staleWhileRevalidateUntil = (row["swr_until"] as Double?).map(Date.init(timeIntervalSince1970:))
    }
}

/// Which ledger entries an invalidation marks stale: one key, every key that
/// starts with a prefix, or every key whose operation carries a tag
/// (``CachingOperation/cacheTags``).
///
/// For example:
///
/// ```swift
/// let targets: [CacheInvalidation] = [.key("senbei:tasks"), .keyPrefix("senbei:contacts:"), .tag("contacts")]
/// ```
public struct CacheInvalidation: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        case key(String)
        case keyPrefix(String)
        case tag(String)
    }

    let kind: Kind

    /// The entry of one key (``CachingOperation/cacheKey``).
    public static func key(_ key: String) -> CacheInvalidation { CacheInvalidation(kind: .key(key)) }
    /// Every entry whose key starts with `prefix` (every page of a list, say).
    public static func keyPrefix(_ prefix: String) -> CacheInvalidation { CacheInvalidation(kind: .keyPrefix(prefix)) }
    /// Every entry whose operation carries `tag` in its ``CachingOperation/cacheTags``.
    public static func tag(_ tag: String) -> CacheInvalidation { CacheInvalidation(kind: .tag(tag)) }

    public var description: String {
        switch kind {
        case .key(let key): "key \(key)"
        case .keyPrefix(let prefix): "keys starting with \(prefix)"
        case .tag(let tag): "tag \(tag)"
        }
    }
}
