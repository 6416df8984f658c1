import Depot
import GRDB

/// Depot's record of each paged list, in the store's database: the pages
/// loaded (their positions, where the next starts, their ledger keys) and
/// which rows each page brought. It lives beside the data, so a cold start
/// knows how far the list got, and a fresh first page can drop, in its own
/// transaction, the rows that only later pages brought.
///
/// - `depot_paging_page`: one row per page loaded, numbered from 0.
/// - `depot_paging_item`: one row per listed id, with the first page that brought it.
enum PagingTable {
    static let pages = "depot_paging_page"
    static let items = "depot_paging_item"

    /// Creates both tables if needed. Called when a store opens.
    static func create(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(pages) (
                paging_key TEXT NOT NULL,
                page_index INTEGER NOT NULL,
                position TEXT NOT NULL,
                next_position TEXT,
                cache_key TEXT NOT NULL,
                PRIMARY KEY (paging_key, page_index)
            );
            CREATE TABLE IF NOT EXISTS \(items) (
                paging_key TEXT NOT NULL,
                item_id NOT NULL,
                page_index INTEGER NOT NULL,
                PRIMARY KEY (paging_key, item_id)
            );
            """)
    }

    /// How many pages in a row may bring only rows already listed before
    /// paging ends with `.invalidPage`: as many pages of new rows may
    /// arrive on top of a page-numbered list between two loads.
    static let repeatedPagesAllowed = 4

    static func exists(_ db: Database) throws -> Bool {
        try db.tableExists(pages) && db.tableExists(items)
    }

    /// How far a paged list got.
    struct State: Sendable, Hashable {
        /// The positions of the pages loaded, first page first.
        var positions: [PagePosition] = []
        /// Where the next page starts; `nil` after the last page or before the first.
        var next: PagePosition?
        /// How many rows the pages brought.
        var itemCount = 0
        /// How many of the last pages in a row brought no row that earlier
        /// pages had not: a page-numbered list shifted by new rows on top.
        var repeatedPages = 0

        var pageCount: Int { positions.count }
        /// Whether there is a page to load: the first one, or the next.
        var hasMore: Bool { positions.isEmpty || next != nil }
    }

    static func state(for key: String, in db: Database) throws -> State {
        let rows = try Row.fetchAll(db, sql: "SELECT position, next_position FROM \(pages) WHERE paging_key = ? ORDER BY page_index", arguments: [key])
        var state = State()
        for row in rows {
            guard let position = PagePosition(stored: row["position"]) else { continue }
            state.positions.append(position)
            state.next = (row["next_position"] as String?).flatMap(PagePosition.init(stored:))
        }
        state.itemCount = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(items) WHERE paging_key = ?", arguments: [key]) ?? 0
        if state.next != nil {
            // A page's rows carry the first page that brought them: pages at the end without any brought nothing new.
            let lastBringing = try Int.fetchOne(db, sql: "SELECT MAX(page_index) FROM \(items) WHERE paging_key = ?", arguments: [key]) ?? -1
            state.repeatedPages = state.pageCount - 1 - lastBringing
        }
        return state
    }

    /// Records page `index`, loaded from `position`, inside the transaction
    /// that wrote its rows; throws (rolling the page back) when the server
    /// made no progress.
    ///
    /// Page 0 starts the list again: the rows earlier pages brought that it no
    /// longer lists go to `remove`, the later pages' ledger entries are
    /// forgotten, and the list holds page 0 alone.
    static func record<ID>(
        _ contents: PageContents<ID>,
        page index: Int,
        at position: PagePosition,
        cacheKey: String,
        key: String,
        operation: String,
        remove: ([ID]) throws -> Void,
        in db: Database
    ) throws {
        func invalid(_ detail: String) -> DepotError {
            DepotError(.invalidPage, operation: operation, detail: "\(detail) (\(key), page \(index + 1) at \(position))")
        }
        if let next = contents.next, let why = next.malformation { throw invalid(why) }
        if contents.next != nil, contents.ids.isEmpty { throw invalid("the page is empty but says there are more") }
        let ids = contents.ids.map(\.databaseValue)

        if index == 0 {
            if contents.next == position { throw invalid("the next page is this page again") }
            let listed = Set(ids)
            let earlier = try DatabaseValue.fetchAll(db, sql: "SELECT item_id FROM \(items) WHERE paging_key = ?", arguments: [key])
            let stale = earlier.filter { !listed.contains($0) }.compactMap(ID.fromDatabaseValue)
            if !stale.isEmpty { try remove(stale) }
            // Later pages' validators describe pages no longer held: their next
            // fetch must be unconditional, or a 304 would confirm rows now gone.
            let laterKeys = try String.fetchAll(db, sql: "SELECT cache_key FROM \(pages) WHERE paging_key = ? AND page_index > 0", arguments: [key])
            for laterKey in Set(laterKeys) where laterKey != cacheKey {
                try db.execute(sql: "DELETE FROM \(SyncLedger.tableName) WHERE key = ?", arguments: [laterKey])
            }
            try db.execute(sql: "DELETE FROM \(pages) WHERE paging_key = ?", arguments: [key])
            try db.execute(sql: "DELETE FROM \(items) WHERE paging_key = ?", arguments: [key])
        } else {
            let state = try state(for: key, in: db)
            guard state.pageCount == index, state.next == position else {
                throw DepotError(.cancelled, operation: operation, detail: "the list started again from its first page while \(position) loaded")
            }
            if let next = contents.next, next == position || state.positions.contains(next) {
                throw invalid("the next page, \(next), is one already loaded")
            }
            // A page-numbered list that got a page of new rows on top since
            // the last load answers the next page with rows already shown:
            // it is recorded and the next one loaded. Only a run of such
            // pages says the server makes no progress.
            if contents.next != nil, !ids.isEmpty, state.repeatedPages >= repeatedPagesAllowed {
                let known = Set(try DatabaseValue.fetchAll(db, sql: "SELECT item_id FROM \(items) WHERE paging_key = ?", arguments: [key]))
                if ids.allSatisfy(known.contains) {
                    throw invalid("\(repeatedPagesAllowed + 1) pages in a row repeat rows earlier pages brought and nothing new")
                }
            }
        }
        try db.execute(
            sql: "INSERT INTO \(pages) (paging_key, page_index, position, next_position, cache_key) VALUES (?, ?, ?, ?, ?)",
            arguments: [key, index, position.stored, contents.next?.stored, cacheKey])
        let insert = try db.cachedStatement(sql: "INSERT INTO \(items) (paging_key, item_id, page_index) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
        for id in ids {
            try insert.execute(arguments: [key, id, index])
        }
    }
}
