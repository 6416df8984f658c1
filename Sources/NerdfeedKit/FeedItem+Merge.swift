import DepotStore
import Foundation
import GRDB

/// What merging a fetched feed into the cache did.
public struct FeedMerge: Sendable, Hashable, CustomStringConvertible {
    /// Items the cache did not have.
    public var inserted: Int
    /// Items the cache had, whose title, author, summary or date changed.
    public var updated: Int
    /// Items the cache had, unchanged.
    public var unchanged: Int

    /// Makes a merge result.
    public init(inserted: Int, updated: Int, unchanged: Int) {
        self.inserted = inserted
        self.updated = updated
        self.unchanged = unchanged
    }

    /// One line for logs and status bars, such as `3 new, 1 updated, 16 unchanged`.
    public var description: String { "\(inserted) new, \(updated) updated, \(unchanged) unchanged" }
}

extension FeedItem {
    /// Merges parsed items into the `feedItem` table by identity within the
    /// feed: new items are inserted (unread), known ones get the feed's link,
    /// title, author, summary and date. The read flag is never touched, items
    /// missing from the feed stay, and an identity listed twice counts once
    /// (the first wins).
    ///
    /// Runs inside the caller's transaction. See ``FeedMerger``.
    static func merge(_ items: [ParsedItem], feed: String, into db: Database) throws -> FeedMerge {
        var merger = try FeedMerger(feed: feed, in: db)
        try merger.merge(merger.encoder.encode(items), in: db)
        return try merger.result(in: db)
    }

    /// Parses a feed document and merges its items batch by batch as the parser
    /// meets them: the parser, and the encoding of each batch, run on another
    /// thread while this one writes, and memory holds a few batches, not the
    /// whole feed. A parse failure anywhere throws `.decoding`, and the
    /// caller's transaction rolls back what the earlier batches wrote.
    ///
    /// Runs inside the caller's transaction.
    static func merge(document data: Data, baseURL: URL, feed: String, into db: Database) throws -> FeedMerge {
        var merger = try FeedMerger(feed: feed, in: db)
        let encoder = merger.encoder
        try OverlappedIngest.run(
            produce: { yield in
                try FeedParser.parse(data, baseURL: baseURL) { batch in try yield(encoder.encode(batch)) }
            },
            consume: { batch in try merger.merge(batch, in: db) }
        )
        return try merger.result(in: db)
    }
}

extension FeedItem {
    /// Merges a feed document as it arrives, as ``merge(document:baseURL:feed:into:)``
    /// does with a whole one: the parser, fed each chunk of `body` as it comes,
    /// and the encoding of each batch run on another thread while this one
    /// writes. Memory holds a few chunks and a few batches. A transfer that
    /// fails halfway, or a parse failure, throws, and the caller's transaction
    /// rolls back what the earlier batches wrote.
    ///
    /// Runs inside the caller's transaction.
    static func merge(streaming body: StreamedBody, baseURL: URL, feed: String, into db: Database) throws -> FeedMerge {
        var merger = try FeedMerger(feed: feed, in: db)
        let encoder = merger.encoder
        try OverlappedIngest.run(
            produce: { yield in
                try withoutActuallyEscaping(yield) { yield in
                    let parser = FeedParser.Incremental(baseURL: baseURL) { batch in try yield(encoder.encode(batch)) }
                    while let chunk = try body.next() { try parser.feed(chunk) }
                    try parser.finish()
                }
            },
            consume: { batch in try merger.merge(batch, in: db) }
        )
        return try merger.result(in: db)
    }
}

/// A batch of parsed items as the arguments of the merge's statements, in
/// chunks of a power of two rows, at most ``FeedMerger/rowsPerStatement``:
/// the two values every statement starts with (the feed, and the table's
/// largest rowid before the merge), then six a row (identity, link, title,
/// author, summary, published). An identity listed twice in the batch is
/// kept once (the first).
struct EncodedFeedBatch: Sendable {
    var chunks: [(rows: Int, arguments: StatementArguments)]
}

/// Turns batches of parsed items into ``EncodedFeedBatch``es on the parser's
/// thread, so that the writer only binds and steps. GRDB's observation
/// bookkeeping runs for every statement (per item it cost more than the
/// writes themselves, 28% of a million-item sync), and SQLite's JSON
/// functions, the way in before, cost a third more than bound values.
struct FeedBatchEncoder: Sendable {
    /// The values every statement of the merge starts with.
    let leading: [DatabaseValue]

    func encode(_ items: [ParsedItem]) -> EncodedFeedBatch {
        var rows: [DatabaseValue] = []
        rows.reserveCapacity(items.count * FeedMerger.valuesPerRow)
        var seen = Set<String>(minimumCapacity: items.count)
        for item in items where seen.insert(item.id).inserted {
            rows.append(item.id.databaseValue)
            rows.append(item.link.databaseValue)
            rows.append(item.title.databaseValue)
            rows.append(item.author.databaseValue)
            rows.append(item.summary.databaseValue)
            // The text GRDB stores a Date as, so that an unchanged date compares equal.
            rows.append(item.published.databaseValue)
        }
        var chunks: [(rows: Int, arguments: StatementArguments)] = []
        var start = 0
        var left = rows.count / FeedMerger.valuesPerRow
        while left > 0 {
            var size = FeedMerger.rowsPerStatement
            while size > left { size /= 2 }
            let end = start + size * FeedMerger.valuesPerRow
            chunks.append((size, StatementArguments(leading + rows[start..<end])))
            start = end
            left -= size
        }
        return EncodedFeedBatch(chunks: chunks)
    }
}

/// Merges one fetched feed into the `feedItem` table, a batch at a time, inside
/// one transaction, and counts what it did.
///
/// Rows are keyed by the feed and the item's identity (``ParsedItem/id``). Per
/// chunk of a batch, one cached `INSERT … SELECT … FROM (VALUES …) ON
/// CONFLICT(feed, id) DO UPDATE … WHERE <something changed>` does the work: no
/// write at all for an unchanged row, so observers are not woken by a feed
/// that did not change; a known link or date is kept when the feed stops
/// giving one.
///
/// An identity listed twice is merged once, the first time. A row this merge
/// inserted is never updated by it (its rowid is past the table's largest at
/// the start). When the feed already had rows, the identities merged so far
/// also go into a temporary table, so memory does not grow with the feed (an
/// in-memory set of a million fingerprints cost 30 to 50 MB); a feed's first
/// sync needs no such table, which saves about 30% of its SQL.
///
/// **Rows from a version 1 cache.** Version 1 knew items by their link alone;
/// the `nerdfeed-v2-identity` migration keeps each such row under its link and
/// marks it `awaitsIdentity`. While the feed has such rows (a partial index
/// finds them; usually there are none), each chunk first moves a marked row
/// whose link an incoming item has to that item's identity and clears the
/// mark: the row, and its read flag, carry on as the same item, which the
/// upsert then updates as usual. A move that would take an identity another
/// row holds is skipped (that row wins; the old one stays marked); when two
/// new items of one chunk share an old row's link, one of them takes it.
/// Moves change no count: an adopted row counts as unchanged or updated by
/// its content, as if it had always had its identity.
struct FeedMerger {
    /// The most rows one statement binds: 2 + 6 × 64 values, far under SQLite's limit.
    static let rowsPerStatement = 64
    /// The values of an item: identity, link, title, author, summary, published.
    static let valuesPerRow = 6

    /// The three statements for chunks of one size. All number their
    /// parameters alike: `?1` the feed, `?2` the largest rowid before the
    /// merge, then the rows' values, so one set of arguments serves each.
    private struct Statements {
        let upsert: Statement
        let remember: Statement
        let adopt: Statement?
    }

    private let feed: String
    private var statements: [Int: Statements] = [:]
    private let adopts: Bool
    /// The table's largest rowid when the merge began: rows past it are this merge's own.
    private let lastRowBefore: Int64
    private let countBefore: Int
    private let changesBefore: Int
    /// Whether the feed had rows when the merge began; if not, no identity needs remembering.
    private let feedHadRows: Bool
    /// The rows the adoptions changed, left out of the counts.
    private var adoptions = 0

    /// Starts a merge into `db` for the feed at `feed` (its URL).
    init(feed: String, in db: Database) throws {
        self.feed = feed
        try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS feedMergeSeen (id TEXT PRIMARY KEY) WITHOUT ROWID")
        try db.execute(sql: "DELETE FROM temp.feedMergeSeen")
        lastRowBefore = try Int64.fetchOne(db, sql: "SELECT COALESCE(MAX(rowid), 0) FROM feedItem") ?? 0
        feedHadRows = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM feedItem WHERE feed = ?)", arguments: [feed]) ?? false
        // The partial index, never the feed's whole range of feedItem_byFeedNewest.
        adopts = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM feedItem INDEXED BY feedItem_awaitingIdentity WHERE feed = ? AND awaitsIdentity)", arguments: [feed]) ?? false
        countBefore = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0
        changesBefore = db.totalChangesCount
    }

    /// Makes the batches' arguments, on any thread.
    var encoder: FeedBatchEncoder {
        FeedBatchEncoder(leading: [feed.databaseValue, lastRowBefore.databaseValue])
    }

    /// Merges the next items of the feed, in order.
    mutating func merge(_ batch: EncodedFeedBatch, in db: Database) throws {
        for (rows, arguments) in batch.chunks {
            let statements = try self.statements(rows: rows, in: db)
            if let adopt = statements.adopt {
                adopt.setUncheckedArguments(arguments)
                try adopt.execute()
                adoptions += db.changesCount
            }
            statements.upsert.setUncheckedArguments(arguments)
            try statements.upsert.execute()
            guard feedHadRows else { continue }
            statements.remember.setUncheckedArguments(arguments)
            try statements.remember.execute()
        }
    }

    /// The statements for chunks of `rows` rows, from the connection's cache.
    private mutating func statements(rows: Int, in db: Database) throws -> Statements {
        if let statements = statements[rows] { return statements }
        // `(?3, ?4, …, ?8), (?9, …)`: the rows' values after the two shared ones.
        let values = (0..<rows).map { row in
            "(" + (0..<Self.valuesPerRow).map { "?\(3 + row * Self.valuesPerRow + $0)" }.joined(separator: ", ") + ")"
        }.joined(separator: ", ")
        let upsert = try db.cachedStatement(sql: """
            INSERT INTO feedItem (feed, id, link, title, author, summary, published, isRead)
            SELECT ?1, column1, column2, column3, column4, column5, column6, 0
            FROM (VALUES \(values))
            WHERE column1 NOT IN (SELECT id FROM temp.feedMergeSeen)
            ON CONFLICT(feed, id) DO UPDATE SET
                link = COALESCE(excluded.link, feedItem.link),
                title = excluded.title,
                author = excluded.author,
                summary = excluded.summary,
                published = COALESCE(excluded.published, feedItem.published)
            WHERE feedItem.rowid <= ?2
                AND (feedItem.title IS NOT excluded.title
                    OR feedItem.author IS NOT excluded.author
                    OR feedItem.summary IS NOT excluded.summary
                    OR (excluded.link IS NOT NULL AND feedItem.link IS NOT excluded.link)
                    OR (excluded.published IS NOT NULL AND feedItem.published IS NOT excluded.published))
            """)
        let remember = try db.cachedStatement(sql: "INSERT OR IGNORE INTO temp.feedMergeSeen (id) SELECT column1 FROM (VALUES \(values))")
        // OR IGNORE: when another row already has the identity, leave this one as it is.
        let adopt = adopts ? try db.cachedStatement(sql: """
            UPDATE OR IGNORE feedItem SET id = incoming.id, awaitsIdentity = 0
            FROM (SELECT column1 AS id, column2 AS link FROM (VALUES \(values))
                  WHERE column2 IS NOT NULL AND column1 NOT IN (SELECT id FROM temp.feedMergeSeen)) AS incoming
            WHERE feedItem.feed = ?1 AND feedItem.awaitsIdentity AND feedItem.id = incoming.link
            """) : nil
        let made = Statements(upsert: upsert, remember: remember, adopt: adopt)
        statements[rows] = made
        return made
    }

    /// What the merge did, counted once every batch is in.
    func result(in db: Database) throws -> FeedMerge {
        let inserted = (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0) - countBefore
        let remembered = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM temp.feedMergeSeen") ?? 0
        // Without remembered identities, every item merged was new.
        let unique = feedHadRows ? remembered : inserted
        // The temporary table's rows count as changes too.
        let changed = db.totalChangesCount - changesBefore - adoptions - remembered
        try db.execute(sql: "DELETE FROM temp.feedMergeSeen")
        return FeedMerge(inserted: inserted, updated: changed - inserted, unchanged: unique - changed)
    }
}
