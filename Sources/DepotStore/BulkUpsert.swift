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
/// faster than a statement per record. Every record must encode the same
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
        encoder = BulkUpsertEncoder(schema: schema, keys: keys, deduplicates: hadRows)
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
            let shape = BulkUpsertStatements.Shape(columns: batch.columns, rows: chunk.rows)
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

/// Records as the arguments of the upsert's statements, made on any thread:
/// the columns, in the table's order, then chunks of a power of two rows.
struct BulkUpsertBatch: Sendable {
    var columns: [String]
    var chunks: [(rows: Int, arguments: StatementArguments)]
}

/// Turns records into ``BulkUpsertBatch``es, on any thread, so that the
/// writer only binds and steps.
struct BulkUpsertEncoder<Record: EncodableRecord>: Sendable {
    /// The most rows a statement binds; with the columns, under SQLite's
    /// smallest limit on bound values (999).
    static var maximumRowsPerStatement: Int { 64 }

    /// Each column's position in the table, by its lowercased name.
    let positions: [String: Int]
    /// The key columns, lowercased.
    let keys: [String]
    /// Whether a key repeated within a batch is dropped here. Not needed when
    /// the table was empty: the statements then skip every conflict.
    let deduplicates: Bool

    init(schema: [String], keys: [String], deduplicates: Bool) {
        positions = Dictionary(schema.enumerated().map { ($1.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
        self.keys = keys.map { $0.lowercased() }
        self.deduplicates = deduplicates
    }

    func batch(_ records: some Sequence<Record>) throws -> BulkUpsertBatch {
        var columns: [String] = []
        var keyIndexes: [Int] = []
        var values: [DatabaseValue] = []
        var seen = Set<[DatabaseValue]>()
        for record in records {
            let row = try record.databaseDictionary
            if columns.isEmpty {
                // The table's order, so that every batch makes the same SQL.
                columns = row.keys.sorted { (positions[$0.lowercased()] ?? .max, $0) < (positions[$1.lowercased()] ?? .max, $1) }
                keyIndexes = try keys.map { key in
                    guard let index = columns.firstIndex(where: { $0.lowercased() == key }) else {
                        throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "BulkUpsert: \(Record.self) does not encode the key column \(key)")
                    }
                    return index
                }
                values.reserveCapacity(columns.count * records.underestimatedCount)
            }
            guard row.count == columns.count else { throw Self.mismatch(row, columns) }
            let start = values.count
            for column in columns {
                guard let value = row[column] else { throw Self.mismatch(row, columns) }
                values.append(value)
            }
            if deduplicates, !seen.insert(keyIndexes.map { values[start + $0] }).inserted {
                values.removeSubrange(start...)
            }
        }
        guard !columns.isEmpty else { return BulkUpsertBatch(columns: [], chunks: []) }
        var limit = Self.maximumRowsPerStatement
        while limit > 1, limit * columns.count > 999 { limit /= 2 }
        var chunks: [(rows: Int, arguments: StatementArguments)] = []
        var start = 0
        var left = values.count / columns.count
        while left > 0 {
            var size = limit
            while size > left { size /= 2 }
            let end = start + size * columns.count
            chunks.append((size, StatementArguments(values[start..<end])))
            start = end
            left -= size
        }
        return BulkUpsertBatch(columns: columns, chunks: chunks)
    }

    static func mismatch(_ row: [String: DatabaseValue], _ columns: [String]) -> DatabaseError {
        DatabaseError(resultCode: .SQLITE_MISUSE, message: "BulkUpsert: a \(Record.self) encodes \(row.keys.sorted()), another \(columns)")
    }
}

/// The SQL of an upsert, for each shape of chunk.
struct BulkUpsertStatements {
    /// The columns a chunk binds, and how many rows.
    struct Shape: Hashable {
        var columns: [String]
        var rows: Int
    }

    /// A shape's statements, from the connection's cache.
    struct Prepared {
        let upsert: Statement
        /// Adds the chunk's keys to the table of keys written; `nil` when the table was empty.
        let remember: Statement?
    }

    let table: String
    let keys: [String]
    /// The lowercased names of the columns a known row keeps.
    let kept: Set<String>
    /// The lowercased names of the columns a known row keeps when the record's value is `NULL`.
    let keptWhenNull: Set<String>
    /// Whether the table had rows: then a known row may be updated, and the
    /// keys written go into a temporary table so that a repeat is skipped.
    /// When it had none, every conflict is a repeat and is skipped outright,
    /// which spares about a third of the SQL.
    let remembers: Bool

    /// The temporary table of keys written, one per table and key.
    var seenTable: String { "temp." + seenTableName }
    private var seenTableName: String {
        "depotBulkUpsertSeen_\(table)_\(keys.joined(separator: "_"))".quotedDatabaseIdentifier
    }

    func prepareSeenTable(in db: Database) throws {
        let columns = keys.indices.map { "key\($0)" }.joined(separator: ", ")
        try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS \(seenTableName) (\(columns), PRIMARY KEY (\(columns))) WITHOUT ROWID")
        try db.execute(sql: "DELETE FROM \(seenTable)")
    }

    /// How many keys were written; empties the table.
    func finishSeenTable(in db: Database) throws -> Int {
        let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(seenTable)") ?? 0
        try db.execute(sql: "DELETE FROM \(seenTable)")
        return count
    }

    func prepare(_ shape: Shape, in db: Database) throws -> Prepared {
        let width = shape.columns.count
        let row = "(" + Array(repeating: "?", count: width).joined(separator: ", ") + ")"
        let values = "VALUES " + Array(repeating: row, count: shape.rows).joined(separator: ", ")
        let target = table.quotedDatabaseIdentifier
        let names = shape.columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        let conflict = keys.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        guard remembers else {
            let upsert = try db.cachedStatement(sql: "INSERT INTO \(target) (\(names)) \(values) ON CONFLICT (\(conflict)) DO NOTHING")
            return Prepared(upsert: upsert, remember: nil)
        }
        let lowercasedKeys = keys.map { $0.lowercased() }
        // `columnN` is VALUES' name for its Nth column.
        let keyColumns = lowercasedKeys.map { key in "column\(shape.columns.firstIndex { $0.lowercased() == key }! + 1)" }
        let unseen = keyColumns.enumerated().map { "key\($0) = incoming.\($1)" }.joined(separator: " AND ")
        var assignments: [String] = []
        var changed: [String] = []
        for column in shape.columns where !lowercasedKeys.contains(column.lowercased()) && !kept.contains(column.lowercased()) {
            let (name, new, old) = (column.quotedDatabaseIdentifier, "excluded.\(column.quotedDatabaseIdentifier)", "\(target).\(column.quotedDatabaseIdentifier)")
            if keptWhenNull.contains(column.lowercased()) {
                assignments.append("\(name) = COALESCE(\(new), \(old))")
                changed.append("(\(new) IS NOT NULL AND \(old) IS NOT \(new))")
            } else {
                assignments.append("\(name) = \(new)")
                changed.append("\(old) IS NOT \(new)")
            }
        }
        let onConflict = assignments.isEmpty
            ? "DO NOTHING"
            : "DO UPDATE SET \(assignments.joined(separator: ", ")) WHERE \(changed.joined(separator: " OR "))"
        let upsert = try db.cachedStatement(sql: """
            INSERT INTO \(target) (\(names))
            SELECT \((1...width).map { "column\($0)" }.joined(separator: ", ")) FROM (\(values)) AS incoming
            WHERE NOT EXISTS (SELECT 1 FROM \(seenTable) WHERE \(unseen))
            ON CONFLICT (\(conflict)) \(onConflict)
            """)
        let remember = try db.cachedStatement(sql: "INSERT OR IGNORE INTO \(seenTable) SELECT \(keyColumns.joined(separator: ", ")) FROM (\(values))")
        return Prepared(upsert: upsert, remember: remember)
    }
}
