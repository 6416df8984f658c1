import Depot
import DepotStore
import Foundation
import SyncStatusText
import TextLayout

/// How the reader shows its items, songs and status as text: the pure part of
/// the terminal view, shared by the interactive screen, `--once` and `--json`.
///
/// For example:
///
/// ```swift
/// print(NerdfeedPresentation.statusLine(status.state, now: Date()))
/// // last synced 2 min ago
/// ```
public enum NerdfeedPresentation {
    /// A short relative time: "just now", "5 min ago", "3 h ago", "2 d ago".
    public static func relative(_ date: Date?, now: Date) -> String {
        SyncStatus.State.relative(date, now: now)
    }

    /// The clock time of `date` ("14:02"), in `timeZone`.
    public static func clockTime(_ date: Date, timeZone: TimeZone = .current) -> String {
        SyncStatus.State.clockTime(date, timeZone: timeZone)
    }

    /// The status line: "syncing…", "last synced 2 min ago", or
    /// "offline — showing cached data from 14:02", then the network's state;
    /// see `SyncStatus.State.summary(now:offlineMode:quality:activity:timeZone:)`.
    public static func statusLine(
        _ state: SyncStatus.State,
        offlineMode: Bool = false,
        quality: ConnectionQuality? = nil,
        activity: NetworkController.Activity? = nil,
        now: Date,
        timeZone: TimeZone = .current
    ) -> String {
        state.summary(now: now, offlineMode: offlineMode, quality: quality, activity: activity, timeZone: timeZone, app: "nerdfeed")
    }

    /// One list row: read mark, title, then author and age, fitted to `width`.
    public static func itemLine(_ item: FeedItem, width: Int, now: Date) -> String {
        let mark = item.isRead ? "✓" : "•"
        var trailer = [item.author, relative(item.published, now: now)].compactMap { $0?.isEmpty == false ? $0 : nil }.joined(separator: " · ")
        if !trailer.isEmpty { trailer = "  " + trailer }
        return fit("\(mark) \(item.title)", trailer: trailer, width: width)
    }

    /// What the detail view shows in place of the link of an item that has none.
    public static let noLink = "(no link)"

    /// The detail view of one item, a line each: the title, the link (or
    /// ``noLink``), the author and date, then the summary wrapped to `width`,
    /// and `footer`. Every line is indented by two spaces and made safe for a
    /// terminal (feed text is drawn as is).
    ///
    /// For example:
    ///
    /// ```swift
    /// terminal.draw(NerdfeedPresentation.detailLines(item, width: 80, now: Date(), footer: "(press any key)"))
    /// ```
    ///
    /// - Parameters:
    ///   - item: The item.
    ///   - width: The terminal's width in columns.
    ///   - now: The time the relative date counts from.
    ///   - footer: The last line, such as how to go back.
    public static func detailLines(_ item: FeedItem, width: Int, now: Date, footer: String) -> [String] {
        var lines = [item.title, item.link ?? noLink]
        let byline = [item.author, item.published.map { "\($0.formatted(date: .abbreviated, time: .shortened)) (\(relative($0, now: now)))" }]
            .compactMap { $0 }.joined(separator: " · ")
        if !byline.isEmpty { lines.append(byline) }
        lines.append("")
        let summary = (item.summary ?? "").replacingOccurrences(of: "\n", with: " ")
        let lineWidth = max(1, width - 2)
        var rest = Substring(summary)
        while !rest.isEmpty, lines.count < 20 {
            lines.append(String(rest.prefix(lineWidth)))
            rest = rest.dropFirst(lineWidth)
        }
        lines.append("")
        lines.append(footer)
        return lines.map { "  " + TextLayout.terminalSafe($0) }
    }

    /// One song row: rank, title and artist.
    public static func songLine(_ song: Song, width: Int) -> String {
        // iTunes titles read "Song - Artist"; the artist has a column of its own.
        var title = song.title
        if !song.artist.isEmpty, title.hasSuffix(" - \(song.artist)") { title = String(title.dropLast(song.artist.count + 3)) }
        return fit(String(format: "%2d. ", song.rank) + title, trailer: "  " + song.artist, width: width)
    }

    /// A progress bar: `[#####.....] 50%`.
    public static func progressBar(_ fraction: Double, width: Int) -> String {
        TextLayout.progressBar(fraction, width: width)
    }

    /// Pads or truncates `text` so that `text + trailer` is exactly `width` characters.
    public static func fit(_ text: String, trailer: String, width: Int) -> String {
        TextLayout.fit(text, trailer: trailer, width: width)
    }

    /// The list as JSON, for scripts: the status, then each item's `id`,
    /// `title`, `link` (absent when the item has none), `author`, `published`
    /// and `read`, then the songs.
    public static func json(items: [FeedItem], songs: [Song], feed: SyncStatus.State, offlineMode: Bool, now: Date) throws -> Data {
        struct Output: Encodable {
            struct Item: Encodable { var id: String; var title: String; var link: String?; var author: String?; var published: Date?; var read: Bool }
            struct Track: Encodable { var rank: Int; var title: String; var artist: String; var link: String }
            var status: String
            var lastSynced: Date?
            var items: [Item]
            var songs: [Track]
        }
        let output = Output(
            status: statusLine(feed, offlineMode: offlineMode, now: now),
            lastSynced: feed.lastSynced,
            items: items.map { .init(id: $0.id, title: $0.title, link: $0.link, author: $0.author, published: $0.published, read: $0.isRead) },
            songs: songs.map { .init(rank: $0.rank, title: $0.title, artist: $0.artist, link: $0.link) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(output)
    }
}
