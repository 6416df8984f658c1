import Depot
import DepotStore
import Foundation

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
        guard let date else { return "" }
        let seconds = max(0, now.timeIntervalSince(date))
        switch seconds {
        case ..<45: return "just now"
        case ..<3_600: return "\(max(1, Int(seconds / 60))) min ago"
        case ..<86_400: return "\(Int(seconds / 3_600)) h ago"
        default: return "\(Int(seconds / 86_400)) d ago"
        }
    }

    /// The clock time of `date` ("14:02"), in `timeZone`.
    public static func clockTime(_ date: Date, timeZone: TimeZone = .current) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
    }

    /// The status line: "syncing…", "last synced 2 min ago", or
    /// "offline — showing cached data from 14:02", then the network's state.
    ///
    /// - Parameters:
    ///   - state: The sync status.
    ///   - offlineMode: The app was asked not to use the network.
    ///   - quality: The connection quality, when the controller has measured it.
    ///   - activity: The controller's queue, for "2 queued, 1 running".
    ///   - now: The current time.
    ///   - timeZone: For clock times.
    public static func statusLine(
        _ state: SyncStatus.State,
        offlineMode: Bool = false,
        quality: ConnectionQuality? = nil,
        activity: NetworkController.Activity? = nil,
        now: Date,
        timeZone: TimeZone = .current
    ) -> String {
        let cachedFrom = state.lastSynced.map { " from \(clockTime($0, timeZone: timeZone))" } ?? ""
        var line: String
        if offlineMode {
            line = state.lastSynced == nil ? "offline — nothing cached yet" : "offline — showing cached data\(cachedFrom)"
        } else if let error = state.lastError, error.code == .offline || quality == .offline {
            line = "offline — showing cached data\(cachedFrom)"
            if state.isSyncing { line += " (waiting for the network)" }
        } else if state.isSyncing {
            line = "syncing…"
        } else if let error = state.lastError {
            line = "sync failed: \(error.message)"
            if state.lastSynced != nil { line += " — showing data\(cachedFrom)" }
        } else if let synced = state.lastSynced {
            line = "last synced \(relative(synced, now: now))"
        } else {
            line = "not synced yet"
        }
        if let quality, !offlineMode { line += " · network \(quality)" }
        if let activity, !offlineMode, activity.queued + activity.running > 0 {
            line += " · \(activity.queued) queued, \(activity.running) running"
        }
        return line
    }

    /// One list row: read mark, title, then author and age, fitted to `width`.
    public static func itemLine(_ item: FeedItem, width: Int, now: Date) -> String {
        let mark = item.isRead ? "✓" : "•"
        var trailer = [item.author, relative(item.published, now: now)].compactMap { $0?.isEmpty == false ? $0 : nil }.joined(separator: " · ")
        if !trailer.isEmpty { trailer = "  " + trailer }
        return fit("\(mark) \(item.title)", trailer: trailer, width: width)
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
        let inner = max(4, width - 7)
        let filled = Int((min(1, max(0, fraction)) * Double(inner)).rounded())
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: inner - filled) + "] " + String(format: "%3d%%", Int(fraction * 100))
    }

    /// Pads or truncates `text` so that `text + trailer` is exactly `width` characters.
    public static func fit(_ text: String, trailer: String, width: Int) -> String {
        let room = max(1, width - trailer.count)
        var head = text
        if head.count > room { head = String(head.prefix(max(0, room - 1))) + "…" }
        return head + String(repeating: " ", count: max(0, room - head.count)) + trailer
    }

    /// The list as JSON, for scripts.
    public static func json(items: [FeedItem], songs: [Song], feed: SyncStatus.State, offlineMode: Bool, now: Date) throws -> Data {
        struct Output: Encodable {
            struct Item: Encodable { var title: String; var link: String; var author: String?; var published: Date?; var read: Bool }
            struct Track: Encodable { var rank: Int; var title: String; var artist: String; var link: String }
            var status: String
            var lastSynced: Date?
            var items: [Item]
            var songs: [Track]
        }
        let output = Output(
            status: statusLine(feed, offlineMode: offlineMode, now: now),
            lastSynced: feed.lastSynced,
            items: items.map { .init(title: $0.title, link: $0.id, author: $0.author, published: $0.published, read: $0.isRead) },
            songs: songs.map { .init(rank: $0.rank, title: $0.title, artist: $0.artist, link: $0.link) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(output)
    }
}
