import Depot
import DepotStore
import Foundation
import GRDB

/// The Nerdfeed cache's schema: the `feedItem` table. The top songs need
/// none: ``FetchTopSongs`` caches the chart as one value, in Depot's own table.
///
/// For example:
///
/// ```swift
/// let store = try Store(path: cacheFile.path, migrator: NerdfeedSchema.migrator)
/// var configuration = NetworkController.Configuration(baseURL: server, transport: transport)
/// configuration.store = store
/// ```
public enum NerdfeedSchema {
    /// The migrations that create (and later evolve) the Nerdfeed tables.
    ///
    /// - `nerdfeed-v1`: `feedItem` keyed by link, and `song`. Frozen: caches
    ///   made by earlier versions have run it.
    /// - `nerdfeed-v2-identity`: `feedItem` keyed by feed and identity (see
    ///   ``FeedItem/id``), with a nullable `link`. Version 1 rows keep their
    ///   link as their identity and their read flag, and are marked
    ///   `awaitsIdentity`: the next merge of their feed moves each to the
    ///   identity of the item that comes with its link (its `guid` or Atom
    ///   `id`), so the read flag stays with the item.
    /// - `nerdfeed-v3-songs-as-value`: drops `song`, which nothing reads any
    ///   more: the chart is a cached value (``FetchTopSongs``), fetched again
    ///   whole on the first run after the upgrade.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("nerdfeed-v1") { db in
            try db.create(table: FeedItem.databaseTableName) { t in
                t.primaryKey("id", .text)
                t.column("title", .text).notNull()
                t.column("author", .text)
                t.column("summary", .text)
                t.column("published", .datetime)
                t.column("feed", .text).notNull()
                t.column("isRead", .boolean).notNull().defaults(to: false)
            }
            // Serves FeedItem.newestFirst(feed:) without a sort step.
            try db.execute(sql: "CREATE INDEX feedItem_byFeedNewest ON feedItem(feed, published DESC, title, id)")
            try db.create(table: "song") { t in
                t.primaryKey("id", .text)
                t.column("rank", .integer).notNull().indexed()
                t.column("title", .text).notNull()
                t.column("artist", .text).notNull()
                t.column("link", .text).notNull()
            }
        }
        migrator.registerMigration("nerdfeed-v2-identity") { db in
            // SQLite cannot change a primary key in place: a new table, the rows, then the old name.
            try db.create(table: "feedItem_v2") { t in
                t.column("feed", .text).notNull()
                t.column("id", .text).notNull()
                t.column("link", .text)
                t.column("title", .text).notNull()
                t.column("author", .text)
                t.column("summary", .text)
                t.column("published", .datetime)
                t.column("isRead", .boolean).notNull().defaults(to: false)
                // A version 1 row, known by its link until a merge brings its item's identity.
                t.column("awaitsIdentity", .boolean).notNull().defaults(to: false)
                t.primaryKey(["feed", "id"])
            }
            try db.execute(sql: """
                INSERT INTO feedItem_v2 (feed, id, link, title, author, summary, published, isRead, awaitsIdentity)
                SELECT feed, id, id, title, author, summary, published, isRead, 1 FROM feedItem
                """)
            try db.drop(table: FeedItem.databaseTableName)
            try db.rename(table: "feedItem_v2", to: FeedItem.databaseTableName)
            // Serves FeedItem.newestFirst(feed:) without a sort step.
            try db.execute(sql: "CREATE INDEX feedItem_byFeedNewest ON feedItem(feed, published DESC, title, id)")
            // Finds a feed's version 1 rows at the start of each merge; empty once they are adopted.
            try db.execute(sql: "CREATE INDEX feedItem_awaitingIdentity ON feedItem(feed) WHERE awaitsIdentity")
        }
        migrator.registerMigration("nerdfeed-v3-songs-as-value") { db in
            try db.drop(table: "song")
        }
        return migrator
    }
}

/// Marks the feed items with this link as read (or unread), in `store`.
///
/// The read flag is local state: it is written directly, not through an
/// operation, and no merge of a fetched feed ever changes it. An item without
/// a link is marked with `store.markRead(item)`, which takes the ``FeedItem``.
///
/// For example:
///
/// ```swift
/// try await markRead("https://forums.example.com/forum/posts/104", in: store)
/// ```
///
/// - Parameters:
///   - link: The items' link (in every feed that lists it).
///   - read: `true` to mark them read, `false` to mark them unread.
///   - store: The cache.
/// - Returns: Whether an item with that link exists.
/// - Throws: `.storage` if the write fails.
@discardableResult
public func markRead(_ link: String, read: Bool = true, in store: Store) async throws(DepotError) -> Bool {
    try await store.markRead(link, read: read)
}

extension Store {
    /// Marks the feed items with this link as read (or unread), in every feed
    /// that lists it.
    ///
    /// The link is not indexed: this suits a few calls, such as a script's.
    /// An app marks the item it shows with `markRead(item)`, which takes the ``FeedItem``.
    ///
    /// For example:
    ///
    /// ```swift
    /// try await store.markRead("https://forums.example.com/forum/posts/104")
    /// ```
    ///
    /// - Parameters:
    ///   - link: The items' link.
    ///   - read: `true` to mark them read, `false` to mark them unread.
    /// - Returns: Whether an item with that link exists.
    /// - Throws: `.storage` if the write fails.
    @discardableResult
    public func markRead(_ link: String, read: Bool = true) async throws(DepotError) -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE feedItem SET isRead = ? WHERE link = ? AND isRead != ?", arguments: [read, link, read])
            if db.changesCount > 0 { return true }
            return try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM feedItem WHERE link = ?)", arguments: [link]) ?? false
        }
    }

    /// Marks a feed item as read (or unread), with or without a link: the row
    /// of its feed and identity.
    ///
    /// For example:
    ///
    /// ```swift
    /// try await store.markRead(item)
    /// ```
    ///
    /// - Parameters:
    ///   - item: The item, as the cache gave it (its ``FeedItem/feed`` and ``FeedItem/id`` are used).
    ///   - read: `true` to mark it read, `false` to mark it unread.
    /// - Returns: Whether the item is still in the cache.
    /// - Throws: `.storage` if the write fails.
    @discardableResult
    public func markRead(_ item: FeedItem, read: Bool = true) async throws(DepotError) -> Bool {
        let (feed, id) = (item.feed, item.id)
        return try await write { db in
            try db.execute(sql: "UPDATE feedItem SET isRead = ? WHERE feed = ? AND id = ? AND isRead != ?", arguments: [read, feed, id, read])
            if db.changesCount > 0 { return true }
            return try FeedItem.exists(db, key: ["feed": feed, "id": id])
        }
    }
}

extension NerdfeedSchema {
    /// How many items of each feed the cache keeps by default, besides the read ones.
    public static let defaultKeptItems = 1_000

    /// The cache's retention: the newest `keep` items of each feed (by
    /// publication date; undated items count as the oldest), plus every read
    /// item whatever its age.
    ///
    /// For example:
    ///
    /// ```swift
    /// let store = try Store(path: cacheFile.path, migrator: NerdfeedSchema.migrator,
    ///                       retention: NerdfeedSchema.retention(keep: 500))
    /// ```
    ///
    /// - Parameter keep: The items kept per feed, at least 0.
    public static func retention(keep: Int = defaultKeptItems) -> Retention {
        Retention(policies: [
            RetentionPolicy(
                table: FeedItem.databaseTableName,
                keeping: [.maxCount(keep, newestBy: "published", per: "feed")],
                protecting: "isRead = 1"),
        ])
    }
}
