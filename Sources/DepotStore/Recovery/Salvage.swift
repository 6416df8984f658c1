import Depot
import GRDB

/// The precious rows read out of a damaged database, table by table, to be
/// written into a fresh one.
///
/// Reading goes in rowid order. When SQLite meets a damaged page, the read
/// goes on after it: it seeks further and further past the last row it read
/// (1, 2, 4, … rowids) until a seek lands on a readable page. A table read
/// in one go is complete; one that needed a seek may have lost rows, and
/// how many is known only if SQLite could still count them.
struct Salvage {
    struct Table {
        var name: String
        /// The rows read, with the salvage's own rowid column first.
        var rows: [Row] = []
        /// `count(*)` of the precious rows in the damaged file, if SQLite could count them.
        var counted: Int?
        /// Whether every row was read without meeting damage.
        var complete = true
    }

    var tables: [Table] = []

    init() {}

    /// Nothing read: every target's table may have lost rows.
    init(unreadable targets: [PreciousRows]) {
        var seen = Set<String>()
        tables = targets.filter { seen.insert($0.table).inserted }.map { Table(name: $0.table, complete: false) }
    }

    /// The column that carries each row's rowid, so that reading can go on past damage.
    private static let rowidColumn = "depot_salvage_rowid"
    /// The largest jump past a damaged page before reading gives up on a table.
    private static let longestSeek: Int64 = 1 << 40
    /// The most reads of one table: enough to get past a few dozen damaged pages.
    private static let maximumReads = 256

    /// What to salvage: the outbox, the rows each retention policy protects,
    /// and the app's precious rows; one target per table and predicate.
    static func targets(precious: [PreciousRows], retention: Retention?) -> [PreciousRows] {
        var targets = [PreciousRows.table(OutboxTable.name)]
        for policy in retention?.policies ?? [] {
            if let predicate = policy.protected { targets.append(.rows(in: policy.table, where: predicate)) }
        }
        for rows in precious where !targets.contains(rows) { targets.append(rows) }
        return targets
    }

    /// Reads what it can of `targets` from `db`. Never throws: what cannot be
    /// read is recorded as incomplete.
    static func read(_ targets: [PreciousRows], from db: Database) -> Salvage {
        var salvage = Salvage()
        for target in targets {
            // Every target is a table of the store's schema: one the damaged
            // file's schema lacks, or a schema that cannot be read, is damage.
            guard (try? db.tableExists(target.table)) == true else {
                salvage.tables.append(Table(name: target.table, complete: false))
                continue
            }
            salvage.tables.append(readRows(of: target, from: db))
        }
        return salvage
    }

    private static func readRows(of target: PreciousRows, from db: Database) -> Table {
        var table = Table(name: target.table)
        let name = target.table.quotedDatabaseIdentifier
        // A `NULL` predicate counts as precious, as retention's `protecting` does.
        let filter = target.predicate.map { "coalesce((\($0)), 1)" } ?? "1"
        table.counted = try? Int.fetchOne(db, sql: "SELECT count(*) FROM \(name) WHERE \(filter)")
        // A count that fails is damage the read may not meet.
        if table.counted == nil { table.complete = false }
        var last: Int64?
        var seek: Int64 = 0
        // A damaged b-tree may repeat rows or loop: each read must move past
        // the last row, and a table gets a bounded number of reads.
        for _ in 0..<maximumReads where seek <= longestSeek {
            let start = last.map { $0 + seek } ?? (seek == 0 ? nil : seek)
            var readAny = false
            do {
                let sql = "SELECT rowid AS \(rowidColumn), * FROM \(name) WHERE \(filter)"
                    + (start == nil ? "" : " AND rowid > ?") + " ORDER BY rowid"
                let rows = try Row.fetchCursor(db, sql: sql, arguments: StatementArguments(start.map { [$0] } ?? []))
                while let row = try rows.next() {
                    let rowid: Int64 = row[rowidColumn]
                    guard last.map({ rowid > $0 }) ?? true else {
                        throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: "rowid \(rowid) out of order")
                    }
                    last = rowid
                    readAny = true
                    table.rows.append(row.copy())
                }
                return table
            } catch {
                table.complete = false
                // Past the damage: from the last row read, one rowid further, then
                // two, four… until a read gets past it (or gives up).
                seek = readAny ? 1 : max(1, seek * 2)
            }
        }
        table.complete = false
        return table
    }

    /// Writes the rows into `db` (a fresh file's schema), column by column
    /// where the fresh table has the column, replacing a row a migration made.
    ///
    /// - Returns: The rows kept and lost, by table, and the tables that may have lost more.
    func write(into db: Database) -> (kept: [String: Int], lost: [String: Int], incomplete: [String]) {
        var kept: [String: Int] = [:]
        var lost: [String: Int] = [:]
        var incomplete: [String] = []
        for table in tables {
            var written = 0
            var failed = 0
            let columns = (try? db.tableExists(table.name)) == true ? (try? db.columns(in: table.name).map(\.name)) ?? [] : []
            for row in table.rows {
                let present = columns.filter { row.hasColumn($0) }
                guard !present.isEmpty else {
                    failed += 1
                    continue
                }
                let sql = "INSERT OR REPLACE INTO \(table.name.quotedDatabaseIdentifier) ("
                    + present.map(\.quotedDatabaseIdentifier).joined(separator: ", ")
                    + ") VALUES (" + Array(repeating: "?", count: present.count).joined(separator: ", ") + ")"
                do {
                    let values: [DatabaseValue] = present.map { row[$0] }
                    try db.cachedStatement(sql: sql).execute(arguments: StatementArguments(values))
                    written += 1
                } catch {
                    failed += 1
                }
            }
            if written > 0 || failed > 0 || table.counted.map({ $0 > 0 }) == true {
                kept[table.name, default: 0] += written
            }
            // Known losses: rows read and not written, and rows counted and not read.
            let unread = table.counted.map { max(0, $0 - table.rows.count) } ?? 0
            if failed + unread > 0 { lost[table.name, default: 0] += failed + unread }
            if !table.complete, table.counted == nil { incomplete.append(table.name) }
        }
        return (kept, lost, incomplete)
    }
}
