import Depot
import Foundation
import NerdfeedKit

extension FuzzTargets {
    /// `TopSongsDocument.songs(from:)` on arbitrary bytes.
    ///
    /// Invariants: it returns or throws a `.decoding` error, nothing else; the
    /// ranks run 1, 2, 3… in chart order; and the chart this target writes back
    /// from the songs (the shape iTunes sends) reads as the same songs.
    static func topSongs(_ data: Data) {
        let songs: [Song]
        do {
            songs = try TopSongsDocument.songs(from: data)
        } catch {
            check(error.code == .decoding, "top-songs", "threw \(error.code), not .decoding: \(error)")
            return
        }
        check(songs.map(\.rank) == Array(songs.indices.map { $0 + 1 }), "top-songs", "ranks \(songs.map(\.rank)) do not run from 1")
        let again: [Song]
        do {
            again = try TopSongsDocument.songs(from: chart(of: songs))
        } catch {
            fail("top-songs", "the chart written from \(songs) does not read back: \(error)")
        }
        check(again == songs, "top-songs", "the chart written from \(songs) reads back as \(again)")
    }

    /// The iTunes chart holding `songs`: one link each, the song's own (so it is
    /// both the preview and, with the id, read back unchanged).
    private static func chart(of songs: [Song]) -> Data {
        struct Label: Encodable { var label: String }
        struct Link: Encodable {
            struct Attributes: Encodable { var href: String }
            var attributes: Attributes
        }
        struct Entry: Encodable {
            var id: Label
            var title: Label
            var artist: Label
            var link: [Link]
            enum CodingKeys: String, CodingKey {
                case id, title, link
                case artist = "im:artist"
            }
        }
        struct Feed: Encodable { var entry: [Entry] }
        struct Chart: Encodable { var feed: Feed }
        let entries = songs.map {
            Entry(id: Label(label: $0.id), title: Label(label: $0.title), artist: Label(label: $0.artist),
                  link: [Link(attributes: .init(href: $0.link))])
        }
        do {
            return try JSONEncoder().encode(Chart(feed: Feed(entry: entries)))
        } catch {
            fail("top-songs", "cannot encode \(songs): \(error)")
        }
    }
}
