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
    /// One cached `INSERT … ON CONFLICT(id) DO UPDATE … WHERE <something changed>`
    /// does the work: a prepared statement instead of GRDB's per-record upsert
    /// (which builds its SQL every time), and no write at all for an unchanged
    /// row, so observers are not woken by a feed that did not change. A known
    /// date is kept when the feed stops giving one.
    ///
    /// Runs inside the caller's transaction.
    static func merge(_ items: [ParsedItem], feed: String, into db: Database) throws -> FeedMerge {
        let upsert = try db.cachedStatement(sql: """
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
        let countBefore = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0
        let changesBefore = db.totalChangesCount
        var seen = Set<String>()
        seen.reserveCapacity(items.count)
        for item in items where seen.insert(item.link).inserted {
            upsert.setUncheckedArguments([item.link, item.title, item.author, item.summary, item.published, feed])
            try upsert.execute()
        }
        let inserted = (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem") ?? 0) - countBefore
        let changed = db.totalChangesCount - changesBefore
        let updated = changed - inserted
        return FeedMerge(inserted: inserted, updated: updated, unchanged: seen.count - changed)
    }
}
