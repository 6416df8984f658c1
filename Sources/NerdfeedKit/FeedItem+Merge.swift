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
        try merger.merge(items, in: db)
        return try merger.result(in: db)
    }

    /// Parses a feed document and merges its items batch by batch as the parser
    /// meets them: the parser runs on another thread while this one writes, and
    /// memory holds a few batches, not the whole feed. A parse failure anywhere
    /// throws `.decoding`, and the caller's transaction rolls back what the
    /// earlier batches wrote.
    ///
    /// Runs inside the caller's transaction.
    static func merge(document data: Data, baseURL: URL, feed: String, into db: Database) throws -> FeedMerge {
        var merger = try FeedMerger(feed: feed, in: db)
        try OverlappedIngest.run(
            produce: { yield in
                try FeedParser.parse(data, baseURL: baseURL) { batch in try yield(batch) }
            },
            consume: { batch in try merger.merge(batch, in: db) }
        )
        return try merger.result(in: db)
    }
}

/// Merges one fetched feed into the `feedItem` table, a batch at a time, inside
/// one transaction, and counts what it did.
///
/// Rows are keyed by the feed and the item's identity (``ParsedItem/id``). One
/// cached `INSERT … ON CONFLICT(feed, id) DO UPDATE … WHERE <something changed>`
/// does the work: a prepared statement instead of GRDB's per-record upsert
/// (which builds its SQL every time), and no write at all for an unchanged
/// row, so observers are not woken by a feed that did not change. A known
/// link or date is kept when the feed stops giving one.
///
/// An identity listed twice is merged once, the first time: the merger
/// remembers a 128-bit fingerprint of each identity it has merged (16 bytes an
/// item, where the identities themselves would cost ten times that for a large feed).
///
/// **Rows from a version 1 cache.** Version 1 knew items by their link alone;
/// the `nerdfeed-v2-identity` migration keeps each such row under its link and
/// marks it `awaitsIdentity`. The merger loads the links of its feed's marked
/// rows (a partial index finds them; usually there are none), and when an item
/// comes with one of those links, it first moves that row to the item's
/// identity and clears the mark: the row, and its read flag, carry on as the
/// same item, which the upsert then updates as usual. A move that would take
/// an identity another row holds is skipped (that row wins; the old one stays
/// marked). Moves change no count: an adopted row counts as unchanged or
/// updated by its content, as if it had always had its identity.
struct FeedMerger {
    private let feed: String
    private let upsert: Statement
    private let adopt: Statement
    private let countBefore: Int
    private let changesBefore: Int
    private var seen = Set<Fingerprint>()
    /// The links of this feed's rows from a version 1 cache not yet adopted.
    private var awaiting: Set<Fingerprint>
    /// The rows the adoptions changed, left out of the counts.
    private var adoptions = 0

    /// Starts a merge into `db` for the feed at `feed` (its URL).
    init(feed: String, in db: Database) throws {
        self.feed = feed
        upsert = try db.cachedStatement(sql: """
            INSERT INTO feedItem (feed, id, link, title, author, summary, published, isRead)
            VALUES (?, ?, ?, ?, ?, ?, ?, 0)
            ON CONFLICT(feed, id) DO UPDATE SET
                link = COALESCE(excluded.link, feedItem.link),
                title = excluded.title,
                author = excluded.author,
                summary = excluded.summary,
                published = COALESCE(excluded.published, feedItem.published)
            WHERE feedItem.title IS NOT excluded.title
                OR feedItem.author IS NOT excluded.author
                OR feedItem.summary IS NOT excluded.summary
                OR (excluded.link IS NOT NULL AND feedItem.link IS NOT excluded.link)
                OR (excluded.published IS NOT NULL AND feedItem.published IS NOT excluded.published)
            """)
        // OR IGNORE: when another row already has the identity, leave this one as it is.
        adopt = try db.cachedStatement(sql: """
            UPDATE OR IGNORE feedItem SET id = ?, awaitsIdentity = 0
            WHERE feed = ? AND id = ? AND awaitsIdentity
            """)
        awaiting = try Set(String.fetchCursor(
            // The partial index, never the feed's whole range of feedItem_byFeedNewest.
            db, sql: "SELECT id FROM feedItem INDEXED BY feedItem_awaitingIdentity WHERE feed = ? AND awaitsIdentity", arguments: [feed]
        ).map(Fingerprint.init))
        countBefore = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0
        changesBefore = db.totalChangesCount
    }

    /// Merges the next items of the feed, in order.
    mutating func merge(_ items: [ParsedItem], in db: Database) throws {
        for item in items where seen.insert(Fingerprint(item.id)).inserted {
            if !awaiting.isEmpty, let link = item.link, awaiting.remove(Fingerprint(link)) != nil {
                adopt.setUncheckedArguments([item.id, feed, link])
                try adopt.execute()
                adoptions += db.changesCount
            }
            upsert.setUncheckedArguments([feed, item.id, item.link, item.title, item.author, item.summary, item.published])
            try upsert.execute()
        }
    }

    /// What the merge did, counted once every batch is in.
    func result(in db: Database) throws -> FeedMerge {
        let inserted = (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0) - countBefore
        let changed = db.totalChangesCount - changesBefore - adoptions
        return FeedMerge(inserted: inserted, updated: changed - inserted, unchanged: seen.count - changed)
    }
}

/// Two independent 64-bit hashes of an identity or a link: equal strings
/// always match, and two different ones of one feed match with a chance of
/// about 2⁻¹²⁸ a pair. Seeded afresh in every process: for memory only.
struct Fingerprint: Hashable {
    private let high: Int
    private let low: Int

    init(_ text: String) {
        var first = Hasher()
        first.combine(0 as UInt8)
        first.combine(text)
        var second = Hasher()
        second.combine(1 as UInt8)
        second.combine(text)
        high = first.finalize()
        low = second.finalize()
    }
}
