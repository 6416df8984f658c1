import Depot
import DepotStore
import Foundation
import GRDB

/// The Nerdfeed cache's schema: the `feedItem` and `song` tables.
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
            try db.create(table: Song.databaseTableName) { t in
                t.primaryKey("id", .text)
                t.column("rank", .integer).notNull().indexed()
                t.column("title", .text).notNull()
                t.column("artist", .text).notNull()
                t.column("link", .text).notNull()
            }
        }
        return migrator
    }
}

/// Marks the feed item with this link as read (or unread), in `store`.
///
/// The read flag is local state: it is written directly, not through an
/// operation, and no merge of a fetched feed ever changes it.
///
/// For example:
///
/// ```swift
/// try await markRead(item.link, in: store)
/// ```
///
/// - Parameters:
///   - link: The item's link (its ``FeedItem/id``).
///   - read: `true` to mark it read, `false` to mark it unread.
///   - store: The cache.
/// - Returns: Whether an item with that link exists.
/// - Throws: `.storage` if the write fails.
@discardableResult
public func markRead(_ link: String, read: Bool = true, in store: Store) async throws(DepotError) -> Bool {
    try await store.markRead(link, read: read)
}

extension Store {
    /// Marks the feed item with this link as read (or unread).
    ///
    /// For example:
    ///
    /// ```swift
    /// try await store.markRead(item.link)
    /// ```
    ///
    /// - Parameters:
    ///   - link: The item's link (its ``FeedItem/id``).
    ///   - read: `true` to mark it read, `false` to mark it unread.
    /// - Returns: Whether an item with that link exists.
    /// - Throws: `.storage` if the write fails.
    @discardableResult
    public func markRead(_ link: String, read: Bool = true) async throws(DepotError) -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE feedItem SET isRead = ? WHERE id = ? AND isRead != ?", arguments: [read, link, read])
            if db.changesCount > 0 { return true }
            return try FeedItem.exists(db, key: link)
        }
    }
}
