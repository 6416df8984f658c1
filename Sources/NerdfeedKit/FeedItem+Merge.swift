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
    /// Merges parsed items into the `feedItem` table by link: new links are
    /// inserted (unread), known ones get the feed's title, author, summary and
    /// date. The read flag is never touched, items missing from the feed stay,
    /// and a link listed twice counts once (the first wins).
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
/// One cached `INSERT … ON CONFLICT(id) DO UPDATE … WHERE <something changed>`
/// does the work: a prepared statement instead of GRDB's per-record upsert
/// (which builds its SQL every time), and no write at all for an unchanged
/// row, so observers are not woken by a feed that did not change. A known
/// date is kept when the feed stops giving one.
///
/// A link listed twice is merged once, the first time: the merger remembers a
/// 128-bit fingerprint of each link it has merged (16 bytes an item, where the
/// links themselves would cost ten times that for a large feed).
struct FeedMerger {
    private let feed: String
    private let upsert: Statement
    private let countBefore: Int
    private let changesBefore: Int
    private var seen = Set<LinkFingerprint>()

    /// Starts a merge into `db` for the feed at `feed` (its URL).
    init(feed: String, in db: Database) throws {
        self.feed = feed
        upsert = try db.cachedStatement(sql: """
            INSERT INTO feedItem (id, title, author, summary, published, feed, isRead)
            VALUES (?, ?, ?, ?, ?, ?, 0)
            ON CONFLICT(id) DO UPDATE SET
                title = excluded.title,
                author = excluded.author,
                summary = excluded.summary,
                published = COALESCE(excluded.published, feedItem.published)
            WHERE feedItem.title IS NOT excluded.title
                OR feedItem.author IS NOT excluded.author
                OR feedItem.summary IS NOT excluded.summary
                OR (excluded.published IS NOT NULL AND feedItem.published IS NOT excluded.published)
            """)
        countBefore = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0
        changesBefore = db.totalChangesCount
    }

    /// Merges the next items of the feed, in order.
    mutating func merge(_ items: [ParsedItem], in db: Database) throws {
        for item in items where seen.insert(LinkFingerprint(item.link)).inserted {
            upsert.setUncheckedArguments([item.link, item.title, item.author, item.summary, item.published, feed])
            try upsert.execute()
        }
    }

    /// What the merge did, counted once every batch is in.
    func result(in db: Database) throws -> FeedMerge {
        let inserted = (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0) - countBefore
        let changed = db.totalChangesCount - changesBefore
        return FeedMerge(inserted: inserted, updated: changed - inserted, unchanged: seen.count - changed)
    }
}

/// Two independent 64-bit hashes of a link: equal links always match, and two
/// different links of one feed match with a chance of about 2⁻¹²⁸ a pair.
struct LinkFingerprint: Hashable {
    private let high: Int
    private let low: Int

    init(_ link: String) {
        var first = Hasher()
        first.combine(0 as UInt8)
        first.combine(link)
        var second = Hasher()
        second.combine(1 as UInt8)
        second.combine(link)
        high = first.finalize()
        low = second.finalize()
    }
}
