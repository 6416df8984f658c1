import DepotStore
import Foundation
import GRDB

/// One item of a feed, as the cache keeps it: a row of the `feedItem` table.
///
/// An item is known by its feed and its ``id`` (together, the primary key),
/// so fetching the feed again updates the item instead of adding a second one,
/// and the read flag (which only the user changes) survives every merge. The
/// id is the one ``ParsedItem/id`` describes: the RSS `guid` or Atom `id`, else
/// the link, else a hash of the title, date and summary. Two feeds may use the
/// same ids (`post-1`) without taking each other's rows.
///
/// An item need not have a link: status pages and some podcasts give none.
///
/// For example, the unread items of a feed:
///
/// ```swift
/// let unread = try await store.read { db in
///     try FeedItem.newestFirst(feed: feedURL).filter(FeedItem.Columns.isRead == false).fetchAll(db)
/// }
/// ```
public struct FeedItem: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// The item's identity within its feed: its `guid`, Atom `id` or
    /// `rdf:about`, else its link, else a hash of its title, date and summary.
    /// With ``feed``, the primary key; unique among the items of one feed.
    public var id: String
    /// The item's absolute link, or `nil` when the feed gives none.
    public var link: String?
    /// The title, cleaned for display.
    public var title: String
    /// The author as the feed gives it (`Name (email)` when it gives both), if it does.
    public var author: String?
    /// The summary as plain text, if any.
    public var summary: String?
    /// When the item was published, if the feed says so.
    public var published: Date?
    /// The URL of the feed the item came from.
    public var feed: String
    /// Whether the user has read the item.
    public var isRead: Bool

    /// Makes an item.
    ///
    /// - Parameters:
    ///   - id: Its identity within `feed` (see ``id``).
    ///   - link: Its absolute link, or `nil` if it has none.
    ///   - title: The title.
    ///   - author: The author.
    ///   - summary: The summary as plain text.
    ///   - published: The publication date.
    ///   - feed: The URL of its feed.
    ///   - isRead: Whether the user has read it.
    public init(id: String, link: String?, title: String, author: String? = nil, summary: String? = nil, published: Date? = nil, feed: String, isRead: Bool = false) {
        self.id = id
        self.link = link
        self.title = title
        self.author = author
        self.summary = summary
        self.published = published
        self.feed = feed
        self.isRead = isRead
    }

    /// The table's columns, for filters and orderings.
    public enum Columns {
        /// The identity within the feed (with ``feed``, the primary key).
        public static let id = Column("id")
        /// The link; `NULL` when the item has none.
        public static let link = Column("link")
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

    /// The columns every fetch selects, by name: never `SELECT *`.
    ///
    /// A store checks its schema on a reader connection before migrating, so
    /// that reader may still hold the schema of before the migration: a
    /// `SELECT *` prepared there takes the old column layout and is re-prepared
    /// with the new one only when it runs, and GRDB would read the row with the
    /// old positions. Named columns keep their positions whichever schema the
    /// statement was prepared with (and `link`, unknown to version 1, makes
    /// SQLite reload the schema at once). The merge's bookkeeping column,
    /// `awaitsIdentity`, is not read.
    public static var databaseSelection: [any SQLSelectable] {
        [Columns.id, Columns.link, Columns.title, Columns.author, Columns.summary, Columns.published, Columns.feed, Columns.isRead]
    }

    /// Decodes a row column by column (several times faster than `Decodable`).
    public init(row: Row) throws {
        id = row[Columns.id]
        link = row[Columns.link]
        title = row[Columns.title]
        author = row[Columns.author]
        summary = row[Columns.summary]
        published = row[Columns.published]
        feed = row[Columns.feed]
        isRead = row[Columns.isRead]
    }

    /// Encodes the record column by column, from ``encodedColumns`` and ``encodeValues(into:)``.
    public func encode(to container: inout PersistenceContainer) {
        encodeColumns(to: &container)
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

extension FeedItem: BulkEncodableRecord {
    /// The columns a merge writes, in the table's order.
    public static let encodedColumns = [Columns.feed, Columns.id, Columns.link, Columns.title, Columns.author, Columns.summary, Columns.published, Columns.isRead]

    /// Appends the values of ``encodedColumns``, in order. A date is the text
    /// GRDB stores a `Date` as, so that an unchanged date compares equal.
    public func encodeValues(into values: inout [DatabaseValue]) {
        values.append(feed.databaseValue)
        values.append(id.databaseValue)
        values.append(link.databaseValue)
        values.append(title.databaseValue)
        values.append(author.databaseValue)
        values.append(summary.databaseValue)
        values.append(published.databaseValue)
        values.append(isRead.databaseValue)
    }
}
