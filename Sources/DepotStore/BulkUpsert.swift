import GRDB

/// Writes many records into one table, inserting the new ones and updating
/// the known ones, inside the caller's transaction: the bulk form of GRDB's
/// `upsert(_:)`, for a ``CachingOperation`` that merges what it fetched into
/// rows the user has touched.
///
/// For example, a chart whose songs the user can star:
///
/// ```swift
/// func write(_ songs: [Song], to db: Database) throws -> BulkUpsert<Song>.Counts {
///     var upsert = try BulkUpsert<Song>(db, keeping: [Song.Columns.isStarred])
///     try upsert.write(songs)
///     return try upsert.finish()
/// }
/// ```
///
/// Rows are matched by the conflict target (the primary key by default):
///
/// - A record with a new key is inserted with every column it encodes, the
///   kept ones too (a new song starts unstarred).
/// - A known row takes the record's values, except for the `keeping` columns,
///   which it never takes, and the `keepingWhenNull` columns, which it takes
///   only when they are not `NULL` (a date the server stopped sending stays).
/// - A known row that would not change is not written, so observers of the
///   table are not woken by a sync that brought nothing new.
/// - A key listed twice in one upsert is written once, the first time; later
///   listings are skipped, in the same `write` or in a later one.
/// - Rows the records do not list are left as they are.
///
/// The records go into SQLite as multi-row statements, up to
/// 64 rows each, kept in the connection's statement cache: several times
/// faster than a statement per record. A value every row of a batch shares
/// (a feed, a parent's id) is bound once a statement. For writes of many
/// thousands, let the record conform to ``BulkEncodableRecord``: it then
/// costs no dictionary per record. Every record must encode the same
/// columns, and no key column may be `NULL`. A failure throws, and the
/// caller's transaction rolls back everything the upsert wrote. Use one
/// upsert at a time per table and, for the counts to be right, write the
/// table only through it until ``finish()``.
public struct BulkUpsert<Record: EncodableRecord & TableRecord> {
    private let db: Database
    private let encoder: BulkUpsertEncoder<Record>
    private let statements: BulkUpsertStatements
    private var cache: [BulkUpsertStatements.Shape: BulkUpsertStatements.Prepared] = [:]
    /// The table's row count at the start, when it had rows; `nil` when it had none.
    private let countBefore: Int?
    /// The rows the upsert's own statements inserted or updated.
    private var changes = 0

    /// Starts an upsert into `Record`'s table.
    ///
    /// For example, feed items whose read flag is the user's, and whose link
    /// and date are kept when the feed stops giving them:
    ///
    /// ```swift
    /// var upsert = try BulkUpsert<FeedItem>(db, keeping: [FeedItem.Columns.isRead],
    ///                                       keepingWhenNull: [FeedItem.Columns.link, FeedItem.Columns.published])
    /// ```
    ///
    /// - Parameters:
    ///   - db: The database, in the transaction the upsert writes in.
    ///   - conflictTarget: The columns of the unique key that matches a record
    ///     with its row. Empty (the default): the table's primary key.
    ///   - keeping: Columns a known row keeps whatever the record says, such as
    ///     a read flag or a favourite: local state the server does not own.
    ///   - keepingWhenNull: Columns a known row keeps when the record's value is
    ///     `NULL`, and takes otherwise.
    /// - Throws: A `DatabaseError` if the table has no such column, or none
    ///   of the columns.
    public init(
        _ db: Database,
        onConflict conflictTarget: [String] = [],
        keeping: [any ColumnExpression] = [],
        keepingWhenNull: [any ColumnExpression] = []
    ) throws {
        try self.init(db, conflictTarget, keeping, keepingWhenNull, ordered: nil)
    }

    init(
        _ db: Database, _ conflictTarget: [String], _ keeping: [any ColumnExpression], _ keepingWhenNull: [any ColumnExpression],
        ordered: BulkUpsertEncoder<Record>.Ordered?
    ) throws {
        let table = Record.databaseTableName
        let schema = try db.columns(in: table).map(\.name)
        func named(_ names: [String]) throws -> [String] {
            try names.map { name in
                guard let column = schema.first(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) else {
                    throw DatabaseError(resultCode: .SQLITE_ERROR, message: "BulkUpsert: table \(table) has no column named \(name)")
                }
                return column
            }
        }
        let keys = try named(conflictTarget.isEmpty ? db.primaryKey(table).columns : conflictTarget)
        let hadRows = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(table.quotedDatabaseIdentifier))") ?? false
        statements = BulkUpsertStatements(
            table: table, keys: keys,
            kept: Set(try named(keeping.map(\.name)).map { $0.lowercased() }),
            keptWhenNull: Set(try named(keepingWhenNull.map(\.name)).map { $0.lowercased() }),
            remembers: hadRows)
        encoder = try BulkUpsertEncoder(schema: schema, keys: keys, deduplicates: hadRows, ordered: ordered)
        self.db = db
        if hadRows {
            countBefore = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table.quotedDatabaseIdentifier)") ?? 0
            try statements.prepareSeenTable(in: db)
        } else {
            countBefore = nil
        }
    }

    /// Inserts or updates `records`, in order.
    ///
    /// For example:
    ///
    /// ```swift
    /// try upsert.write(page.items)
    /// ```
    ///
    /// - Parameter records: The records; a key already written by this upsert is skipped.
    /// - Throws: What SQLite throws, or a `DatabaseError` if a record does not
    ///   encode the columns the others do. The caller's transaction rolls back.
    public mutating func write(_ records: some Sequence<Record>) throws {
        try write(encoder.batch(records))
    }

    /// Writes one encoded batch: a statement per chunk, then, when the table
    /// had rows, the chunk's keys into the table of keys already written.
    mutating func write(_ batch: BulkUpsertBatch) throws {
        for chunk in batch.chunks {
            let shape = BulkUpsertStatements.Shape(columns: batch.columns, shared: batch.shared, rows: chunk.rows)
            let prepared = try cache[shape] ?? statements.prepare(shape, in: db)
            cache[shape] = prepared
            prepared.upsert.setUncheckedArguments(chunk.arguments)
            try prepared.upsert.execute()
            changes += db.changesCount
            if let remember = prepared.remember {
                remember.setUncheckedArguments(chunk.arguments)
                try remember.execute()
            }
        }
    }

    /// What the upsert did so far; also empties its table of written keys.
    /// Call it once, after the last write.
    ///
    /// For example:
    ///
    /// ```swift
    /// let counts = try upsert.finish()
    /// print(counts)   // "3 new, 1 updated, 16 unchanged"
    /// ```
    @discardableResult
    public mutating func finish() throws -> Counts {
        guard let countBefore else {
            // The table was empty: every record written was new, and each repeat was skipped.
            return Counts(inserted: changes, updated: 0, unchanged: 0)
        }
        let inserted = (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(statements.table.quotedDatabaseIdentifier)") ?? 0) - countBefore
        let written = try statements.finishSeenTable(in: db)
        return Counts(inserted: inserted, updated: changes - inserted, unchanged: written - changes)
    }

    /// What an upsert did: rows inserted, rows updated, and known rows left
    /// as they were. A key listed twice counts once.
    ///
    /// For example:
    ///
    /// ```swift
    /// if counts.inserted > 0 { print("\(counts.inserted) new") }
    /// ```
    public struct Counts: Sendable, Hashable, CustomStringConvertible {
        /// Records whose key the table did not have.
        public var inserted: Int
        /// Known rows that took new values.
        public var updated: Int
        /// Known rows that already held the record's values.
        public var unchanged: Int

        /// Makes counts, for comparing in tests.
        ///
        /// For example:
        ///
        /// ```swift
        /// #expect(counts == .init(inserted: 3, updated: 1, unchanged: 16))
        /// ```
        ///
        /// - Parameters:
        ///   - inserted: Rows inserted.
        ///   - updated: Rows updated.
        ///   - unchanged: Known rows left as they were.
        public init(inserted: Int, updated: Int, unchanged: Int) {
            self.inserted = inserted
            self.updated = updated
            self.unchanged = unchanged
        }

        /// One line for logs and status bars, such as `3 new, 1 updated, 16 unchanged`.
        public var description: String { "\(inserted) new, \(updated) updated, \(unchanged) unchanged" }
    }
}

extension BulkUpsert where Record: BulkEncodableRecord {
    /// Starts an upsert of records that list their values in column order:
    /// the same upsert, without a dictionary per record.
    ///
    /// For example:
    ///
    /// ```swift
    /// var upsert = try BulkUpsert<FeedItem>(db, keeping: [FeedItem.Columns.isRead])
    /// ```
    ///
    /// - Parameters:
    ///   - db: The database, in the transaction the upsert writes in.
    ///   - conflictTarget: The columns of the unique key that matches a record
    ///     with its row. Empty (the default): the table's primary key.
    ///   - keeping: Columns a known row keeps whatever the record says.
    ///   - keepingWhenNull: Columns a known row keeps when the record's value is `NULL`.
    /// - Throws: A `DatabaseError` if the table has no such column, or if
    ///   ``BulkEncodableRecord/encodedColumns`` leaves out a key column.
    public init(
        _ db: Database,
        onConflict conflictTarget: [String] = [],
        keeping: [any ColumnExpression] = [],
        keepingWhenNull: [any ColumnExpression] = []
    ) throws {
        let ordered = BulkUpsertEncoder<Record>.Ordered(columns: Record.encodedColumns.map(\.name)) { record, values in
            record.encodeValues(into: &values)
        }
        try self.init(db, conflictTarget, keeping, keepingWhenNull, ordered: ordered)
    }
}

extension BulkUpsert where Record: Sendable {
    /// Inserts or updates the records `produce` makes, while it makes them:
    /// `produce` runs on another thread, and so does the encoding of each
    /// batch it yields, while the calling thread writes the batches before.
    /// Parsing and writing overlap on two cores, and memory holds a few
    /// batches, never the whole response.
    ///
    /// For example, feed items as a streaming parser meets them:
    ///
    /// ```swift
    /// try upsert.write(from: { yield in
    ///     try FeedParser.parse(data, baseURL: url) { items in try yield(items.map { FeedItem($0, feed: feed) }) }
    /// })
    /// ```
    ///
    /// - Parameters:
    ///   - produce: Makes the records, passing each batch to `yield`. `yield`
    ///     throws once the writing side has stopped; let it propagate.
    ///   - beforeEachBatch: Runs on the calling thread, in the transaction,
    ///     before each batch is written, with its records: the place to move
    ///     rows the batch should find (the leftovers of an old schema, say).
    /// - Throws: The first error of either side. Whatever happens, `produce`
    ///   has finished when this returns; on an error the caller's transaction
    ///   rolls back what the earlier batches wrote.
    public mutating func write(
        from produce: @escaping @Sendable (_ yield: ([Record]) throws -> Void) throws -> Void,
        beforeEachBatch: (([Record]) throws -> Void)? = nil
    ) throws {
        let encoder = self.encoder
        // The records cross over only when the writing side needs them.
        let passesRecords = beforeEachBatch != nil
        try OverlappedIngest.run(
            produce: { yield in
                try produce { records in try yield((passesRecords ? records : [], encoder.batch(records))) }
            },
            consume: { next in
                try beforeEachBatch?(next.0)
                try write(next.1)
            }
        )
    }
}
