import Depot
import Foundation
import GRDB

/// A ``RetentionPolicy`` checked against the schema and turned into SQL:
/// which rows are candidates, oldest first, and how a batch of them goes.
struct EvictionPlan: Sendable {
    let table: String
    /// The primary key's columns; `["rowid"]` for a table without one.
    let keyColumns: [String]
    let hiddenRowID: Bool
    let protected: String?
    let ages: [(column: String, age: Duration)]
    let counts: [(count: Int, column: String, partition: String?)]
    let referenced: Bool
    let results: Bool
    let syncKeyColumn: String?
    /// The column that says how old a row is, for the order of eviction and the size budget.
    let ageColumn: String?

    /// One row eviction may take, as a read found it.
    struct Candidate: Sendable {
        var key: [DatabaseValue]
        /// Whether an age or count rule takes it (else only a reference rule does).
        var byLimit: Bool
        /// Its age column as a Julian day, if it has one.
        var age: Double?
    }

    /// Checks `policy` against the schema of `db`.
    static func resolve(_ policy: RetentionPolicy, in db: Database) throws(DepotError) -> EvictionPlan {
        let table = policy.table
        func invalid(_ detail: String, _ underlying: (any Error)? = nil) -> DepotError {
            DepotError(.storage, detail: "the retention policy for table \(table) \(detail)", underlying: underlying)
        }
        let columns: [String]
        let primaryKey: PrimaryKeyInfo
        do {
            guard try db.tableExists(table) else { throw invalid("names a table that does not exist") }
            columns = try db.columns(in: table).map(\.name)
            primaryKey = try db.primaryKey(table)
        } catch let error as DepotError {
            throw error
        } catch {
            throw invalid("cannot read the table's schema", error)
        }
        let known = Set(columns.map { $0.lowercased() })
        func column(_ name: String, _ role: String) throws(DepotError) -> String {
            guard known.contains(name.lowercased()) else {
                throw invalid("names \(role) column \(name), which the table does not have (it has \(columns.joined(separator: ", ")))")
            }
            return name
        }
        var ages: [(column: String, age: Duration)] = []
        var counts: [(count: Int, column: String, partition: String?)] = []
        var referenced = false, results = false
        var syncKeyColumn: String?
        for rule in policy.rules {
            switch rule.kind {
            case .maxAge(let age, let name):
                guard age >= .zero else { throw invalid("keeps rows at most \(age) old, which is negative") }
                ages.append((try column(name, "a date"), age))
            case .maxCount(let count, let name, let partition):
                guard count >= 0 else { throw invalid("keeps at most \(count) rows, which is negative") }
                counts.append((count, try column(name, "an order"), try partition.map { name throws(DepotError) in try column(name, "a partition") }))
            case .referenced(let byResults, let keyColumn):
                referenced = true
                results = results || byResults
                if let keyColumn { syncKeyColumn = try column(keyColumn, "a sync key") }
            }
        }
        guard !policy.rules.isEmpty else { throw invalid("has no rules: it would keep every row") }
        let hiddenRowID = primaryKey.isRowID && primaryKey.rowIDColumn == nil
        let plan = EvictionPlan(
            table: table,
            keyColumns: primaryKey.columns,
            hiddenRowID: hiddenRowID,
            protected: policy.protected,
            ages: ages,
            counts: counts,
            referenced: referenced,
            results: results,
            syncKeyColumn: syncKeyColumn,
            ageColumn: ages.first?.column ?? counts.first?.column)
        if let protected = policy.protected {
            do {
                _ = try db.makeStatement(sql: "SELECT 1 FROM \(table.quotedDatabaseIdentifier) WHERE \(protected) LIMIT 0")
            } catch {
                throw invalid("protects rows with `\(protected)`, which SQLite cannot read", error)
            }
        }
        return plan
    }

    // MARK: - SQL

    /// A value as a Julian day: GRDB's dates are text, other apps store seconds since 1970.
    static func julianDay(_ expression: String) -> String {
        "(CASE typeof(\(expression)) WHEN 'text' THEN julianday(\(expression)) WHEN 'integer' THEN \(expression) / 86400.0 + 2440587.5 WHEN 'real' THEN \(expression) / 86400.0 + 2440587.5 END)"
    }

    static func julianDay(of date: Date) -> Double {
        date.timeIntervalSince1970 / 86_400 + 2_440_587.5
    }

    private var source: String {
        "(SELECT *\(hiddenRowID ? ", rowid AS depot_rowid" : "")\(windows) FROM \(table.quotedDatabaseIdentifier))"
    }

    private var windows: String {
        let tieBreak = hiddenRowID ? "rowid DESC" : keyColumns.map { "\($0.quotedDatabaseIdentifier) DESC" }.joined(separator: ", ")
        return counts.enumerated().map { index, rule in
            let partition = rule.partition.map { "PARTITION BY \($0.quotedDatabaseIdentifier) " } ?? ""
            return ", ROW_NUMBER() OVER (\(partition)ORDER BY \(rule.column.quotedDatabaseIdentifier) DESC, \(tieBreak)) AS depot_rank\(index)"
        }.joined()
    }

    private var keySelection: [String] {
        hiddenRowID ? ["r.depot_rowid"] : keyColumns.map { "r.\($0.quotedDatabaseIdentifier)" }
    }

    private var ageExpression: String {
        ageColumn.map { Self.julianDay("r.\($0.quotedDatabaseIdentifier)") } ?? "NULL"
    }

    private var protectedClause: String {
        protected.map { "WHERE NOT (\($0))" } ?? ""
    }

    /// Every row some rule takes and the predicate does not protect, oldest first.
    /// Rows that only a reference rule takes are filtered by results later.
    func candidates(in db: Database, now: Date) throws -> [Candidate] {
        // Count rules alone, and every partition within its count: no rank
        // can pass its limit, so skip ranking (and sorting) the whole table.
        if ages.isEmpty, !referenced, try !exceedsACount(in: db) { return [] }
        var limits: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        for (column, age) in ages {
            let (seconds, attoseconds) = age.components
            let cutoff = Self.julianDay(of: now) - (Double(seconds) + Double(attoseconds) / 1e18) / 86_400
            limits.append("\(Self.julianDay("r.\(column.quotedDatabaseIdentifier)")) < ?")
            arguments.append(cutoff)
        }
        for (index, rule) in counts.enumerated() {
            limits.append("r.depot_rank\(index) > \(rule.count)")
        }
        let byLimit = limits.isEmpty ? "0" : "(\(limits.joined(separator: " OR ")))"
        var byReference = "0"
        if referenced {
            byReference = syncKeyColumn.map { "NOT (r.\($0.quotedDatabaseIdentifier) IN (SELECT key FROM \(SyncLedger.tableName)))" } ?? "1"
        }
        let keys = keySelection.enumerated().map { "\($1) AS depot_k\($0)" }.joined(separator: ", ")
        let keyOrder = keySelection.indices.map { "depot_k\($0)" }.joined(separator: ", ")
        let sql = """
            SELECT * FROM (
                SELECT \(keys), \(byLimit) AS depot_byLimit, \(byReference) AS depot_byReference, \(ageExpression) AS depot_age
                FROM \(source) AS r \(protectedClause)
            ) WHERE depot_byLimit OR depot_byReference
            ORDER BY depot_age IS NULL, depot_age, \(keyOrder)
            """
        let width = keySelection.count
        return try Row.fetchAll(db, sql: sql, arguments: StatementArguments(arguments)).map { row in
            Candidate(
                key: (0..<width).map { row[$0] as DatabaseValue },
                byLimit: row["depot_byLimit"] as Bool? ?? false,
                age: row["depot_age"])
        }
    }

    /// Whether some partition (or the table, for a rule without one) holds
    /// more rows than a count rule keeps. An index on the partition's column
    /// makes this a scan of that index, with no sort.
    func exceedsACount(in db: Database) throws -> Bool {
        let quotedTable = table.quotedDatabaseIdentifier
        for rule in counts {
            let sql = rule.partition.map { partition in
                "SELECT EXISTS (SELECT 1 FROM \(quotedTable) GROUP BY \(partition.quotedDatabaseIdentifier) HAVING COUNT(*) > ?)"
            } ?? "SELECT COUNT(*) > ? FROM \(quotedTable)"
            if try Bool.fetchOne(db, sql: sql, arguments: [rule.count]) ?? false { return true }
        }
        return false
    }

    /// The oldest `limit` unprotected rows, for the size budget.
    func oldest(_ limit: Int, in db: Database) throws -> [Candidate] {
        let keys = keySelection.enumerated().map { "\($1) AS depot_k\($0)" }.joined(separator: ", ")
        let keyOrder = keySelection.indices.map { "depot_k\($0)" }.joined(separator: ", ")
        let plainSource = "(SELECT *\(hiddenRowID ? ", rowid AS depot_rowid" : "") FROM \(table.quotedDatabaseIdentifier))"
        let sql = """
            SELECT * FROM (SELECT \(keys), \(ageExpression) AS depot_age FROM \(plainSource) AS r \(protectedClause))
            ORDER BY depot_age IS NULL, depot_age, \(keyOrder) LIMIT ?
            """
        let width = keySelection.count
        return try Row.fetchAll(db, sql: sql, arguments: [limit]).map { row in
            Candidate(key: (0..<width).map { row[$0] as DatabaseValue }, byLimit: true, age: row["depot_age"])
        }
    }

    /// Deletes the rows with these keys that the predicate does not protect
    /// (it may have changed since they were chosen). Returns how many went.
    func delete(_ keys: [[DatabaseValue]], in db: Database) throws -> Int {
        guard !keys.isEmpty else { return 0 }
        let width = keyColumns.count
        let target = hiddenRowID ? "rowid" : keyColumns.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
        let protection = protected.map { " AND NOT (\($0))" } ?? ""
        // SQLite takes at most 32,766 arguments a statement.
        let rowsPerStatement = max(1, 10_000 / width)
        var deleted = 0
        var start = 0
        while start < keys.count {
            let chunk = keys[start..<min(start + rowsPerStatement, keys.count)]
            start += rowsPerStatement
            let list: String
            if width == 1 {
                list = "\(target) IN (\(Array(repeating: "?", count: chunk.count).joined(separator: ", ")))"
            } else {
                let tuple = "(" + Array(repeating: "?", count: width).joined(separator: ", ") + ")"
                list = "(\(target)) IN (VALUES \(Array(repeating: tuple, count: chunk.count).joined(separator: ", ")))"
            }
            try db.execute(
                sql: "DELETE FROM \(table.quotedDatabaseIdentifier) WHERE \(list)\(protection)",
                arguments: StatementArguments(chunk.flatMap { $0 }))
            deleted += db.changesCount
        }
        return deleted
    }
}
