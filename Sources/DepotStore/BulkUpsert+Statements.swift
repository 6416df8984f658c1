import GRDB

/// Records as the arguments of the upsert's statements, made on any thread:
/// the columns, the ones every record gives the same value (a feed, a
/// parent's id), then chunks of a power of two rows, each bound as the shared
/// values once and the other columns of each row.
struct BulkUpsertBatch: Sendable {
    var columns: [String]
    /// The indexes in `columns` of the values every row shares, bound once a statement.
    var shared: [Int] = []
    var chunks: [(rows: Int, arguments: StatementArguments)]
}

/// Turns records into ``BulkUpsertBatch``es, on any thread, so that the
/// writer only binds and steps.
struct BulkUpsertEncoder<Record: EncodableRecord>: Sendable {
    /// The most rows a statement binds; with the columns, under SQLite's
    /// smallest limit on bound values (999).
    static var maximumRowsPerStatement: Int { 64 }

    /// How a ``BulkEncodableRecord`` gives its values: in a fixed order.
    struct Ordered: Sendable {
        let columns: [String]
        let encode: @Sendable (Record, inout [DatabaseValue]) -> Void
    }

    /// Each column's position in the table, by its lowercased name.
    let positions: [String: Int]
    /// The key columns, lowercased.
    let keys: [String]
    /// Whether a key repeated within a batch is dropped here. Not needed when
    /// the table was empty: the statements then skip every conflict.
    let deduplicates: Bool
    /// The fixed order, or `nil` to read each record's `databaseDictionary`.
    let ordered: Ordered?

    init(schema: [String], keys: [String], deduplicates: Bool, ordered: Ordered?) throws {
        positions = Dictionary(schema.enumerated().map { ($1.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
        self.keys = keys.map { $0.lowercased() }
        self.deduplicates = deduplicates
        self.ordered = ordered
        if let ordered { _ = try keyIndexes(in: ordered.columns) }
    }

    /// Where the key columns are among `columns`.
    func keyIndexes(in columns: [String]) throws -> [Int] {
        try keys.map { key in
            guard let index = columns.firstIndex(where: { $0.lowercased() == key }) else {
                throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "BulkUpsert: \(Record.self) does not encode the key column \(key)")
            }
            return index
        }
    }

    func batch(_ records: some Sequence<Record>) throws -> BulkUpsertBatch {
        var columns = ordered?.columns ?? []
        var keyIndexes = ordered == nil ? [] : try keyIndexes(in: columns)
        var values: [DatabaseValue] = []
        var seen = Set<[DatabaseValue]>()
        for record in records {
            let start = values.count
            if let ordered {
                ordered.encode(record, &values)
            } else {
                let row = try record.databaseDictionary
                if columns.isEmpty {
                    // The table's order, so that every batch makes the same SQL.
                    columns = row.keys.sorted { (positions[$0.lowercased()] ?? .max, $0) < (positions[$1.lowercased()] ?? .max, $1) }
                    keyIndexes = try self.keyIndexes(in: columns)
                }
                guard row.count == columns.count else { throw Self.mismatch(row.keys.sorted(), columns) }
                for column in columns {
                    guard let value = row[column] else { throw Self.mismatch(row.keys.sorted(), columns) }
                    values.append(value)
                }
            }
            guard values.count == start + columns.count else { throw Self.mismatch(["\(values.count - start) values"], columns) }
            if deduplicates, !seen.insert(keyIndexes.map { values[start + $0] }).inserted {
                values.removeSubrange(start...)
            }
        }
        guard !values.isEmpty else { return BulkUpsertBatch(columns: [], chunks: []) }
        let width = columns.count
        let count = values.count / width
        // A value every row shares is bound once a statement, not once a row, as the
        // hand-written feed merge did with its feed: a string bound costs SQLite a copy.
        var shared = count < Self.minimumRowsToShare ? [] : (0..<width).filter { column in
            (1..<count).allSatisfy { values[$0 * width + column] == values[column] }
        }
        if shared.count == width { shared = [] }  // the same record again and again: VALUES needs a column
        let varying = (0..<width).filter { !shared.contains($0) }
        var limit = Self.maximumRowsPerStatement
        while limit > 1, limit * width > 999 { limit /= 2 }
        var chunks: [(rows: Int, arguments: StatementArguments)] = []
        var row = 0
        while row < count {
            var size = limit
            while size > count - row { size /= 2 }
            var arguments = shared.map { values[$0] }
            arguments.reserveCapacity(shared.count + size * varying.count)
            if shared.isEmpty {
                arguments += values[row * width..<(row + size) * width]
            } else {
                for index in row..<row + size {
                    for column in varying { arguments.append(values[index * width + column]) }
                }
            }
            chunks.append((size, StatementArguments(arguments)))
            row += size
        }
        return BulkUpsertBatch(columns: columns, shared: shared, chunks: chunks)
    }

    /// Below this many rows a batch binds every value of every row: a value
    /// two rows happen to share is no sign of a shared column.
    static var minimumRowsToShare: Int { 16 }

    static func mismatch(_ encoded: [String], _ columns: [String]) -> DatabaseError {
        DatabaseError(resultCode: .SQLITE_MISUSE, message: "BulkUpsert: a \(Record.self) encodes \(encoded), not \(columns)")
    }
}

/// The SQL of an upsert, for each shape of chunk.
struct BulkUpsertStatements {
    /// The columns a chunk binds, which of them once for every row, and how many rows.
    struct Shape: Hashable {
        var columns: [String]
        var shared: [Int]
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
        // Parameters are numbered: ?1… the shared values, then each row's others.
        let varying = shape.columns.indices.filter { !shape.shared.contains($0) }
        let values = "VALUES " + (0..<shape.rows).map { row in
            "(" + varying.indices.map { "?\(shape.shared.count + row * varying.count + $0 + 1)" }.joined(separator: ", ") + ")"
        }.joined(separator: ", ")
        // Each column as the SELECT reads it: a shared parameter, or VALUES' `columnN`.
        let source = shape.columns.indices.map { column in
            shape.shared.firstIndex(of: column).map { "?\($0 + 1)" } ?? "column\(varying.firstIndex(of: column)! + 1)"
        }
        let target = table.quotedDatabaseIdentifier
        let names = shape.columns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        let conflict = keys.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        let insert = "INSERT INTO \(target) (\(names)) SELECT \(source.joined(separator: ", ")) FROM (\(values)) AS incoming"
        guard remembers else {
            let upsert = try db.cachedStatement(sql: "\(insert) WHERE true ON CONFLICT (\(conflict)) DO NOTHING")
            return Prepared(upsert: upsert, remember: nil)
        }
        let lowercasedKeys = keys.map { $0.lowercased() }
        let keySources = lowercasedKeys.map { key in source[shape.columns.firstIndex { $0.lowercased() == key }!] }
        let unseen = keySources.enumerated().map { "key\($0) = \($1.hasPrefix("?") ? $1 : "incoming." + $1)" }.joined(separator: " AND ")
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
            \(insert)
            WHERE NOT EXISTS (SELECT 1 FROM \(seenTable) WHERE \(unseen))
            ON CONFLICT (\(conflict)) \(onConflict)
            """)
        let remember = try db.cachedStatement(sql: "INSERT OR IGNORE INTO \(seenTable) SELECT \(keySources.joined(separator: ", ")) FROM (\(values))")
        return Prepared(upsert: upsert, remember: remember)
    }
}
