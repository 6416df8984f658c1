import Foundation

/// One entry of the top-songs chart. ``FetchTopSongs`` caches the whole chart
/// as one value, `[Song]`, top first.
///
/// The identity does not depend on the rank, so when a song moves up the
/// chart, a list that tells rows by `id` (SwiftUI's `ForEach`) shows a move
/// rather than a deletion and an insertion.
///
/// For example:
///
/// ```swift
/// let songs = try controller.value(for: FetchTopSongs(), policy: FetchTopSongs.cachePolicy)
/// for song in songs.value ?? [] { print(song.rank, song.title) }
/// ```
public struct Song: Codable, Hashable, Sendable, Identifiable {
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
}
