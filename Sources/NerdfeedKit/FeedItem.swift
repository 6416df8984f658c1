import Foundation
import GRDB

/// One item of a feed, as the cache keeps it: a row of the `feedItem` table.
///
/// The item's absolute link is its identity, so fetching the feed again
/// updates the item instead of adding a second one, and the read flag (which
/// only the user changes) survives every merge.
///
/// For example, the unread items of a feed:
///
/// ```swift
/// let unread = try await store.read { db in
///     try FeedItem.newestFirst(feed: feedURL).filter(FeedItem.Columns.isRead == false).fetchAll(db)
/// }
/// ```
public struct FeedItem: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// The item's absolute link: its primary key.
    public var id: String
    /// The title, cleaned for display.
    public var title: String
    /// The author's name, if the feed gives one.
    public var author: String?
    /// The summary as plain text, if any.
    public var summary: String?
    /// When the item was published, if the feed says so.
    public var published: Date?
    /// The URL of the feed the item came from.
    public var feed: String
    /// Whether the user has read the item.
    public var isRead: Bool

    /// The item's link; the same as ``id``.
    public var link: String { id }

    /// Makes an item.
    public init(id: String, title: String, author: String? = nil, summary: String? = nil, published: Date? = nil, feed: String, isRead: Bool = false) {
        self.id = id
        self.title = title
        self.author = author
        self.summary = summary
        self.published = published
        self.feed = feed
        self.isRead = isRead
    }

    /// The table's columns, for filters and orderings.
    public enum Columns {
        /// The link (primary key).
        public static let id = Column("id")
        /// The title.
        public static let title = Column("title")
        /// The author.
        public static let author = Column("author")
        /// The summary.
        public static let summary = Column("summary")
        /// The publication date.
        public static let published = Column("published")
        /// The feed URL.
        public static let feed = Column("feed")
        /// The read flag.
        public static let isRead = Column("isRead")
    }

    /// The table's name: `feedItem`.
    public static let databaseTableName = "feedItem"

    /// Decodes a row column by column (several times faster than `Decodable`).
    public init(row: Row) throws {
        id = row[Columns.id]
        title = row[Columns.title]
        author = row[Columns.author]
        summary = row[Columns.summary]
        published = row[Columns.published]
        feed = row[Columns.feed]
        isRead = row[Columns.isRead]
    }

    /// Encodes the record column by column.
    public func encode(to container: inout PersistenceContainer) throws {
        container[Columns.id] = id
        container[Columns.title] = title
        container[Columns.author] = author
        container[Columns.summary] = summary
        container[Columns.published] = published
        container[Columns.feed] = feed
        container[Columns.isRead] = isRead
    }

    /// The items of one feed, newest first; undated items last, then by title.
    ///
    /// For example:
    ///
    /// ```swift
    /// let items = try controller.results(for: FeedItem.newestFirst(feed: url.absoluteString),
    ///                                    refreshing: FetchForumFeed(url: url))
    /// ```
    ///
    /// - Parameter feed: The feed's URL, as ``feed`` holds it.
    public static func newestFirst(feed: String) -> QueryInterfaceRequest<FeedItem> {
        // SQLite sorts NULL lowest, so DESC puts undated items last; the
        // feedItem_byFeedNewest index serves this exact order.
        FeedItem.filter(Columns.feed == feed).order(Columns.published.desc, Columns.title, Columns.id)
    }

    /// The items of the feed at `feed`, newest first.
    public static func newestFirst(feed: URL) -> QueryInterfaceRequest<FeedItem> {
        newestFirst(feed: feed.absoluteString)
    }
}
