#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import DepotStore
import Foundation
import GRDB
import GRDBSQLite

/// How soon the first cached rows are on screen: opening a `Store` and the
/// first snapshot of a 1,000-row `ResultsController` on the main actor,
/// against opening the file and reading the same rows with SQLite's C API (and
/// against GRDB alone), alternated in one process, a fresh open each time.
/// Given the release folder, also the whole process: `nerdfeed --once
/// --offline` against `sqlite3`, with `/bin/true` and a trivial Swift program
/// as the floor of starting a process.
enum FirstRowsBench {
    /// Nerdfeed's `feedItem` row, decoded the way `FeedItem` is (by column name).
    struct Item: Sendable, Identifiable, Equatable, FetchableRecord, TableRecord {
        var id: String
        var link: String?
        var title: String
        var author: String?
        var summary: String?
        var published: Date?
        var feed: String
        var isRead: Bool
        static let databaseTableName = "feedItem"
        static var databaseSelection: [any SQLSelectable] { columns }

        init(row: GRDB.Row) {
            id = row["id"]
            link = row["link"]
            title = row["title"]
            author = row["author"]
            summary = row["summary"]
            published = row["published"]
            feed = row["feed"]
            isRead = row["isRead"]
        }
    }

    /// The same row decoded by position into the C API's Swift values (the
    /// date as its text): the like-for-like comparison.
    struct PositionalItem: Sendable, Identifiable, Equatable, FetchableRecord, TableRecord {
        var id: String
        var link: String?
        var title: String
        var author: String?
        var summary: String?
        var published: String?
        var feed: String
        var isRead: Bool
        static let databaseTableName = "feedItem"
        static var databaseSelection: [any SQLSelectable] { columns }

        init(row: GRDB.Row) {
            (id, link, title, author, summary, published, feed, isRead) = (row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])
        }
    }

    static var columns: [any SQLSelectable] { ["id", "link", "title", "author", "summary", "published", "feed", "isRead"].map { Column($0) } }

    /// What the C API reads into: the same columns as Swift values (the date
    /// as its text: no parsing).
    struct RawItem {
        var id: String
        var link: String?
        var title: String
        var author: String?
        var summary: String?
        var published: String?
        var feed: String
        var isRead: Bool
    }

    static let feed = "http://127.0.0.1:18088/forum/rss"
    static let sql = "SELECT id, link, title, author, summary, published, feed, isRead FROM feedItem WHERE feed = ? ORDER BY published DESC, title, id LIMIT 1000"

    /// Nerdfeed's schema (`NerdfeedSchema.migrator`, which this package cannot import), so the
    /// migration check does the same work as the app's.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("nerdfeed-v1") { db in
            try db.execute(sql: """
                CREATE TABLE feedItem (id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, author TEXT, summary TEXT, published DATETIME, feed TEXT NOT NULL, isRead BOOLEAN NOT NULL DEFAULT 0);
                CREATE INDEX feedItem_byFeedNewest ON feedItem(feed, published DESC, title, id);
                CREATE TABLE song (id TEXT PRIMARY KEY NOT NULL, rank INTEGER NOT NULL, title TEXT NOT NULL, artist TEXT NOT NULL, link TEXT NOT NULL);
                CREATE INDEX song_on_rank ON song(rank);
                """)
        }
        migrator.registerMigration("nerdfeed-v2-identity") { db in
            try db.execute(sql: """
                CREATE TABLE feedItem_v2 (feed TEXT NOT NULL, id TEXT NOT NULL, link TEXT, title TEXT NOT NULL, author TEXT, summary TEXT, published DATETIME, isRead BOOLEAN NOT NULL DEFAULT 0, awaitsIdentity BOOLEAN NOT NULL DEFAULT 0, PRIMARY KEY (feed, id));
                DROP TABLE feedItem;
                ALTER TABLE feedItem_v2 RENAME TO feedItem;
                CREATE INDEX feedItem_byFeedNewest ON feedItem(feed, published DESC, title, id);
                CREATE INDEX feedItem_awaitingIdentity ON feedItem(feed) WHERE awaitsIdentity;
                """)
        }
        return migrator
    }

    /// Writes a cache of 1,000 items of one feed (as a sync would leave it) at `path`.
    static func makeCache(at path: String) async throws {
        let store = try Store(path: path, migrator: migrator)
        try await store.writer.write { db in
            for i in 1...1000 {
                let author = "author\(i % 17)"
                try db.execute(
                    sql: "INSERT INTO feedItem (feed, id, link, title, author, summary, published, isRead) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    arguments: [feed, "post-\(i)", "http://127.0.0.1:18088/forum/posts/\(i)", "Re: topic number \(i) about caching", author,
                                "\(author) wrote about topic \(i) & asked: does it \"just work\"? Chapter 12 says <see page \(100 + i)>.",
                                Date(timeIntervalSince1970: 1_790_000_000 - Double(i) * 60), i % 3 == 0])
            }
            try db.execute(sql: "INSERT INTO depot_sync_ledger (key, last_synced) VALUES (?, ?)", arguments: [feed, Date().timeIntervalSinceReferenceDate])
        }
        try await store.writer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        try await store.close()
    }

    /// Opens the store and makes the results controller; returns the two
    /// durations and the controller, still live.
    @MainActor
    static func depot<Record: FetchableRecord & TableRecord & Identifiable & Equatable & Sendable>(
        _ type: Record.Type, _ path: String
    ) throws -> (open: Double, results: Double, ResultsController<Record>, Store) where Record.ID: Sendable {
        let start = ContinuousClock.now
        let store = try Store(path: path, migrator: migrator, configuration: configuration)
        let opened = ContinuousClock.now
        let results = try ResultsController(store: store, request: Record.filter(Column("feed") == feed).order(Column("published").desc, Column("title"), Column("id")).limit(1000))
        let end = ContinuousClock.now
        guard results.fetchedObjects.count == 1000 else { fatalError("the results have \(results.fetchedObjects.count) rows") }
        return ((opened - start).seconds, (end - opened).seconds, results, store)
    }

    /// GRDB's configuration for the store and the pool: with `FIRSTROWS_PERSIST_WAL`,
    /// the WAL file outlives the last connection (as on Apple platforms), so that the
    /// next open finds it and GRDB does not write to create it.
    static var configuration: Configuration {
        var configuration = Configuration()
        if ProcessInfo.processInfo.environment["FIRSTROWS_PERSIST_WAL"] != nil {
            configuration.prepareDatabase { db in
                var persist: Int32 = 1
                sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
            }
        }
        return configuration
    }

    /// GRDB alone: a pool and one read of the same rows into the same records.
    static func grdb(_ path: String) throws -> Double {
        let start = ContinuousClock.now
        let pool = try DatabasePool(path: path, configuration: configuration)
        let items = try pool.read { db in try PositionalItem.fetchAll(db, sql: sql, arguments: [feed]) }
        let end = ContinuousClock.now
        guard items.count == 1000 else { fatalError("GRDB read \(items.count) rows") }
        try pool.close()
        return (end - start).seconds
    }

    /// The C API: open, prepare, step, copy every column into Swift values.
    static func raw(_ path: String) -> Double {
        let start = ContinuousClock.now
        var connection: OpaquePointer?
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK else { fatalError("open") }
        sqlite3_busy_timeout(connection, 10_000)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection, sql, -1, &statement, nil) == SQLITE_OK else { fatalError(String(cString: sqlite3_errmsg(connection))) }
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        sqlite3_bind_text(statement, 1, feed, -1, transient)
        func text(_ column: Int32) -> String? {
            guard let pointer = sqlite3_column_text(statement, column) else { return nil }
            return String(cString: pointer)
        }
        var items: [RawItem] = []
        while sqlite3_step(statement) == SQLITE_ROW {
            items.append(RawItem(id: text(0)!, link: text(1), title: text(2)!, author: text(3), summary: text(4),
                                 published: text(5), feed: text(6)!, isRead: sqlite3_column_int(statement, 7) != 0))
        }
        sqlite3_finalize(statement)
        let end = ContinuousClock.now
        sqlite3_close_v2(connection)
        guard items.count == 1000 else { fatalError("the C API read \(items.count) rows") }
        return (end - start).seconds
    }

    /// Toggles one item's read flag and waits until `results` delivered it:
    /// the observation is live, and its start-up work is over before the next repetition.
    @MainActor
    static func settle<Record>(_ results: ResultsController<Record>, _ store: Store) async throws {
        var updates = results.updates().makeAsyncIterator()
        _ = await updates.next()
        try await store.write { db in try db.execute(sql: "UPDATE feedItem SET isRead = NOT isRead WHERE feed = ? AND id = 'post-1'", arguments: [feed]) }
        guard await updates.next() != nil else { fatalError("no live update") }
    }

    /// Measures `depot(path)`, then checks the observation is live and closes
    /// the store, as a process that exits does: the next open is a cold one again.
    @MainActor
    static func depotSettled<Record: FetchableRecord & TableRecord & Identifiable & Equatable & Sendable>(
        _ type: Record.Type, _ path: String
    ) async throws -> (open: Double, results: Double, cpu: Double) where Record.ID: Sendable {
        let cpuBefore = cpuSeconds()
        let (open, results, store): (Double, Double, Store)
        do {
            let measured = try depot(type, path)
            try await settle(measured.2, measured.3)
            (open, results, store) = (measured.0, measured.1, measured.3)
        }
        // Waits for the reads under way, such as the released observation's.
        try await store.close()
        return (open, results, cpuSeconds() - cpuBefore)
    }

    /// The process's user and system CPU time.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }


    @MainActor
    static func run(repetitions: Int, binaries: String?, trivialSwift: String?) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "firstrows-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        try await makeCache(at: path)
        say("firstrows: 1,000 rows, \(repetitions) repetitions, load average \(loadAverage())")

        var named = Figures(), positional = Figures()
        var (grdbTotal, rawTotal): ([Double], [Double]) = ([], [])
        for repetition in 0..<(repetitions + 10) {
            // Four variants, in a random order (a rotation would keep the same
            // one before each, and what the previous one left moved the next);
            // the first ten rounds warm up.
            var (n, p, g, r) = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 0.0, 0.0)
            for variant in (0..<4).shuffled() {
                switch variant {
                case 0: n = try await depotSettled(Item.self, path)
                case 1: p = try await depotSettled(PositionalItem.self, path)
                case 2: g = try grdb(path)
                default: r = raw(path)
                }
            }
            guard repetition >= 10 else { continue }
            named.add(n)
            positional.add(p)
            grdbTotal.append(g)
            rawTotal.append(r)
        }
        func line(_ name: String, _ values: [Double]) -> String {
            String(format: "%@ median %.3f ms, p90 %.3f ms", name, percentile(values, 0.5) * 1e3, percentile(values, 0.9) * 1e3)
        }
        say(line("  SQLite C API (open + read):                       ", rawTotal))
        say(line("  GRDB alone (DatabasePool + read, by position):    ", grdbTotal))
        /// The median of per-repetition ratios to the C API (the figure), the ratio of medians and p90.
        func versusC(_ figures: Figures) -> (paired: Double, medians: Double, p90: Double) {
            let paired = zip(figures.total, rawTotal).map { $0 / $1 }
            return (percentile(paired, 0.5), percentile(figures.total, 0.5) / percentile(rawTotal, 0.5), percentile(paired, 0.9))
        }
        for (name, figures) in [("records decoded by position (like the C API)", positional), ("records decoded by name, dates parsed (FeedItem)", named)] {
            say("  Store + ResultsController, \(name):")
            say(line("    first snapshot:                                 ", figures.total))
            say(line("    of which Store(path:migrator:):                 ", figures.open))
            say(line("    of which ResultsController(...):                ", figures.results))
            let ratio = versusC(figures)
            say(String(format: "    against the C API: %.2fx (medians), %.2fx (median of paired ratios), p90 %.2fx; CPU per repetition with its live-update check %.2f ms",
                       ratio.medians, ratio.paired, ratio.p90, percentile(figures.cpu, 0.5) * 1e3))
        }
        say(String(format: "  GRDB alone / C API: %.2fx", percentile(grdbTotal, 0.5) / percentile(rawTotal, 0.5)))
        var rows = [("firstrows: `Store` open + first 1,000-row snapshot vs SQLite C API, by position", positional), ("firstrows: the same, records shaped like `FeedItem`", named)].map { figure, figures in
            let ratio = versusC(figures)
            return SummaryRow(figure, target: "≤ 3×", String(format: "%@ paired (%@ of medians; C API %.2f ms); p90 %@",
                                                             SummaryRow.times(ratio.paired), SummaryRow.times(ratio.medians), percentile(rawTotal, 0.5) * 1e3, SummaryRow.times(ratio.p90)),
                              met: ratio.paired <= 3)
        }
        rows.append(SummaryRow("firstrows: GRDB alone vs C API", SummaryRow.times(percentile(grdbTotal, 0.5) / percentile(rawTotal, 0.5))))

        if let binaries {
            rows += try await wholeProcess(binaries: binaries, trivialSwift: trivialSwift, folder: folder, repetitions: repetitions)
        }
        SummaryRow.print(rows)
    }

    /// `nerdfeed --once --offline --limit 1000` against `sqlite3` on the same
    /// cache, and the floor of starting a process, alternated; returns their summary rows.
    static func wholeProcess(binaries: String, trivialSwift: String?, folder: URL, repetitions: Int) async throws -> [SummaryRow] {
        // The same schema as the app's (its migrations' names), so nerdfeed takes the file as its own.
        let cache = folder.appending(path: "nerdfeed.sqlite").path
        try await makeCache(at: cache)
        var commands: [(String, String, [String])] = [
            ("nerdfeed --once --offline --limit 1000", "\(binaries)/nerdfeed", ["--once", "--offline", "--limit", "1000", "--port", "18088", "--cache", cache]),
            ("sqlite3 (the same 1,000 rows)", "/usr/bin/sqlite3", [cache, sql.replacingOccurrences(of: "?", with: "'\(feed)'")]),
            ("/bin/true", "/bin/true", []),
        ]
        if let trivialSwift { commands.append(("a trivial Swift program", trivialSwift, [])) }
        var times = Array(repeating: [Double](), count: commands.count)
        for repetition in 0..<(repetitions + 3) {
            for index in commands.indices.shuffled() {
                let seconds = try NerdfeedBench.measure(commands[index].1, commands[index].2).seconds
                if repetition >= 3 { times[index].append(seconds) }
            }
        }
        say("whole process, \(repetitions) runs each, alternated, load average \(loadAverage()):")
        for (index, command) in commands.enumerated() {
            say(String(format: "  %@: median %.2f ms, p90 %.2f ms", command.0, percentile(times[index], 0.5) * 1e3, percentile(times[index], 0.9) * 1e3))
        }
        say(String(format: "  nerdfeed / sqlite3: %.2fx", percentile(times[0], 0.5) / percentile(times[1], 0.5)))
        let median = times.map { percentile($0, 0.5) * 1e3 }
        return [
            SummaryRow("firstrows: whole process, `nerdfeed --once --offline --limit 1000` vs `sqlite3`",
                       String(format: "%.1f vs %.1f ms (%@)", median[0], median[1], SummaryRow.times(median[0] / median[1]))),
            SummaryRow("firstrows: process floor, `/bin/true` / trivial Swift program",
                       String(format: "%.2f / %@ ms", median[2], median.count > 3 ? String(format: "%.2f", median[3]) : "–")),
        ]
    }

    struct Figures {
        var open: [Double] = [], results: [Double] = [], total: [Double] = [], cpu: [Double] = []
        mutating func add(_ figures: (open: Double, results: Double, cpu: Double)) {
            open.append(figures.open)
            results.append(figures.results)
            total.append(figures.open + figures.results)
            cpu.append(figures.cpu)
        }
    }

    static func percentile(_ values: [Double], _ q: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * q + 0.5))]
    }

    static func loadAverage() -> String {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
    }
}
