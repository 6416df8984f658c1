import DepotStore
import Foundation
import GRDB

/// What merging a fetched feed into the cache did, such as `3 new, 1 updated, 16 unchanged`.
public typealias FeedMerge = BulkUpsert<FeedItem>.Counts

extension FeedItem {
    /// Merges parsed items into the `feedItem` table by feed and identity.
    ///
    /// The feed owns an item's title, author and summary, and its link and
    /// date when it gives them; the user owns the read flag, which no merge
    /// touches. New items come in unread, items missing from the feed stay,
    /// and an identity listed twice counts once (the first wins). Runs inside
    /// the caller's transaction.
    static func merge(_ items: [ParsedItem], feed: String, into db: Database) throws -> FeedMerge {
        var upsert = try upsert(in: db)
        let rows = items.map { FeedItem($0, feed: feed) }
        try Version1Rows(feed: feed, in: db)?.adopt(rows)
        try upsert.write(rows)
        return try upsert.finish()
    }

    /// Parses a feed document and merges its items batch by batch as the
    /// parser meets them, the parser on another thread. A parse failure
    /// anywhere throws `.decoding`, and the caller's transaction rolls back
    /// what the earlier batches wrote.
    static func merge(document data: Data, baseURL: URL, feed: String, into db: Database) throws -> FeedMerge {
        var upsert = try upsert(in: db)
        try upsert.write(from: { yield in
            try FeedParser.parse(data, baseURL: baseURL) { items in try yield(items.map { FeedItem($0, feed: feed) }) }
        }, beforeEachBatch: Version1Rows(feed: feed, in: db)?.adopt)
        return try upsert.finish()
    }

    /// Merges a feed document as it arrives: the parser, on another thread, is
    /// fed each chunk of `body` as it comes. A transfer that fails halfway, or
    /// a parse failure, throws, and the caller's transaction rolls back.
    static func merge(streaming body: StreamedBody, baseURL: URL, feed: String, into db: Database) throws -> FeedMerge {
        var upsert = try upsert(in: db)
        try upsert.write(from: { yield in
            try withoutActuallyEscaping(yield) { yield in
                let parser = FeedParser.Incremental(baseURL: baseURL) { items in try yield(items.map { FeedItem($0, feed: feed) }) }
                while let chunk = try body.next() { try parser.feed(chunk) }
                try parser.finish()
            }
        }, beforeEachBatch: Version1Rows(feed: feed, in: db)?.adopt)
        return try upsert.finish()
    }

    /// How a fetched item meets its cached row: the read flag stays, and so
    /// do a known link and date when the feed stops giving them.
    private static func upsert(in db: Database) throws -> BulkUpsert<FeedItem> {
        try BulkUpsert(db, keeping: [Columns.isRead], keepingWhenNull: [Columns.link, Columns.published])
    }

    /// A parsed item of `feed`, unread.
    init(_ item: ParsedItem, feed: String) {
        self.init(id: item.id, link: item.link, title: item.title, author: item.author,
                  summary: item.summary, published: item.published, feed: feed)
    }
}

/// A feed's rows from a version 1 cache, which knew items by their link
/// alone: the `nerdfeed-v2-identity` migration keeps each under its link and
/// marks it `awaitsIdentity`. Before each batch is merged, a marked row whose
/// link an incoming item has moves to that item's identity, so the row, and
/// its read flag, carry on as the same item; the merge then updates it as
/// usual, and counts it as if it had always had its identity. A move that
/// would take an identity another row holds is skipped (that row wins; the
/// old one stays marked).
struct Version1Rows {
    let db: Database
    let feed: String

    /// The feed's marked rows, or `nil` when it has none (usually).
    init?(feed: String, in db: Database) throws {
        // The partial index, never the feed's whole range of feedItem_byFeedNewest.
        let marked = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM feedItem INDEXED BY feedItem_awaitingIdentity WHERE feed = ? AND awaitsIdentity)", arguments: [feed])
        guard marked == true else { return nil }
        self.db = db
        self.feed = feed
    }

    /// Moves the marked rows whose links `items` bring to those items' identities.
    func adopt(_ items: [FeedItem]) throws {
        let move = try db.cachedStatement(sql: "UPDATE OR IGNORE feedItem SET id = ?, awaitsIdentity = 0 WHERE feed = ? AND awaitsIdentity AND id = ?")
        for item in items {
            guard let link = item.link else { continue }
            move.setUncheckedArguments([item.id, feed, link])
            try move.execute()
        }
    }
}
