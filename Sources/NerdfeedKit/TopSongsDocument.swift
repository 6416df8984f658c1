import Depot
import Foundation

/// The iTunes top-songs JSON: `feed.entry[]` with `title.label`, `im:artist.label`
/// (or `artist.label`), `id.label` and `link[].attributes.href`.
///
/// iTunes writes a one-element array as the bare element (a chart of one song
/// has `"entry": {…}`) and leaves `entry` out of an empty chart; both are read.
///
/// `package` so that the fuzz targets (`Fuzz/Targets`) can reach ``songs(from:)``.
package struct TopSongsDocument: Decodable {
    struct Label: Decodable {
        var label: String
    }

    struct Link: Decodable {
        struct Attributes: Decodable {
            var href: String
        }
        var attributes: Attributes
    }

    struct Entry: Decodable {
        var id: Label?
        var title: Label
        var artist: Label?
        var links: [Link]

        enum CodingKeys: String, CodingKey {
            case id, title, link, artist
            case imArtist = "im:artist"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decodeIfPresent(Label.self, forKey: .id)
            title = try container.decode(Label.self, forKey: .title)
            artist = try container.decodeIfPresent(Label.self, forKey: .imArtist) ?? container.decodeIfPresent(Label.self, forKey: .artist)
            links = try container.decodeIfPresent(OneOrMany<Link>.self, forKey: .link)?.values ?? []
        }
    }

    struct Feed: Decodable {
        var entries: [Entry]

        enum CodingKeys: String, CodingKey { case entry }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            entries = try container.decodeIfPresent(OneOrMany<Entry>.self, forKey: .entry)?.values ?? []
        }
    }

    var feed: Feed

    /// The songs in `data`, ranked from 1 in the order of the chart.
    /// - Throws: `.decoding` when the JSON does not have the chart's shape.
    package static func songs(from data: Data) throws(DepotError) -> [Song] {
        let document: TopSongsDocument
        do {
            document = try JSONDecoder().decode(TopSongsDocument.self, from: data)
        } catch {
            throw DepotError(.decoding, detail: "not a top-songs chart", underlying: error)
        }
        return document.feed.entries.enumerated().map { index, entry in
            let rank = index + 1
            let links = entry.links.map(\.attributes.href)
            let preview = links.count > 1 ? links[1] : links.first ?? ""
            return Song(
                id: entry.id?.label ?? links.first ?? "rank:\(rank)",
                rank: rank,
                title: entry.title.label,
                artist: entry.artist?.label ?? "",
                link: preview)
        }
    }
}

/// A JSON value that is either one `Element` or an array of them.
struct OneOrMany<Element: Decodable>: Decodable {
    var values: [Element]

    init(from decoder: any Decoder) throws {
        if let many = try? [Element](from: decoder) {
            values = many
        } else {
            values = [try Element(from: decoder)]
        }
    }
}
