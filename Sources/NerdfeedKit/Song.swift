import Foundation
import GRDB

/// One entry of the top-songs chart, as the cache keeps it: a row of the `song` table.
///
/// The identity does not depend on the rank, so when a song moves up the
/// chart, results controllers report a move rather than a deletion and an insertion.
///
/// For example:
///
/// ```swift
/// let songs = try controller.results(for: Song.byRank, refreshing: FetchTopSongs(),
///                                    policy: FetchTopSongs.cachePolicy)
/// ```
public struct Song: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// A stable identifier: the entry's `id.label` (the song's page), or its first link.
    public var id: String
    /// The position in the chart, from 1.
    public var rank: Int
    /// The title as the chart gives it (`title.label`, "Song - Artist" in the iTunes feed).
    public var title: String
    /// The artist's name, or an empty string if the chart does not say.
    public var artist: String
    /// The audio preview's URL (`link[1].attributes.href`), or the first link when there is no second.
    public var link: String

    /// Makes a song.
    public init(id: String, rank: Int, title: String, artist: String, link: String) {
        self.id = id
        self.rank = rank
        self.title = title
        self.artist = artist
        self.link = link
    }

    /// The table's columns, for filters and orderings.
    public enum Columns {
        /// The stable identifier (primary key).
        public static let id = Column("id")
        /// The chart position.
        public static let rank = Column("rank")
        /// The title.
        public static let title = Column("title")
        /// The artist.
        public static let artist = Column("artist")
        /// The preview URL.
        public static let link = Column("link")
    }

    /// The table's name: `song`.
    public static let databaseTableName = "song"

    /// Decodes a row column by column.
    public init(row: Row) throws {
        id = row[Columns.id]
        rank = row[Columns.rank]
        title = row[Columns.title]
        artist = row[Columns.artist]
        link = row[Columns.link]
    }

    /// Encodes the record column by column.
    public func encode(to container: inout PersistenceContainer) throws {
        container[Columns.id] = id
        container[Columns.rank] = rank
        container[Columns.title] = title
        container[Columns.artist] = artist
        container[Columns.link] = link
    }

    /// The whole chart, top first.
    public static var byRank: QueryInterfaceRequest<Song> {
        Song.order(Columns.rank, Columns.id)
    }
}
