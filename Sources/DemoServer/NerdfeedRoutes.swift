import Foundation
import Hummingbird
import NIOCore
import Seeded

/// `GET /forum/rss`, `GET /forum/atom` and `GET /topsongs/limit=N/json`, each with
/// an ETag and Last-Modified, answering a matching conditional request with 304.
enum NerdfeedRoutes {
    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        router.get("/forum/rss") { request, _ in
            let posts = state.feed.posts(elapsed: state.elapsed, limit: feedLimit(request))
            let updated = posts.first?.published ?? state.configuration.epoch
            let body = FeedRenderer.rss(posts, baseURL: baseURL(request, state), updated: updated)
            return conditional(request, body: body, contentType: "application/rss+xml; charset=utf-8", lastModified: updated)
        }
        router.get("/forum/atom") { request, _ in
            let posts = state.feed.posts(elapsed: state.elapsed, limit: feedLimit(request))
            let updated = posts.first?.published ?? state.configuration.epoch
            let body = FeedRenderer.atom(posts, baseURL: baseURL(request, state), updated: updated)
            return conditional(request, body: body, contentType: "application/atom+xml; charset=utf-8", lastModified: updated)
        }
        router.get("/topsongs/:limit/json") { request, context in
            let text = try context.parameters.require("limit")
            guard text.hasPrefix("limit="), let limit = Int(text.dropFirst("limit=".count)), (1...200).contains(limit) else {
                return Response(status: .notFound, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "use /topsongs/limit=N/json with N in 1...200")))
            }
            let feed = TopSongs.feed(limit: limit, seed: state.configuration.seed, baseURL: baseURL(request, state))
            let data = try JSONEncoder.sorted.encode(feed)
            return conditional(request, body: String(decoding: data, as: UTF8.self), contentType: "application/json", lastModified: state.configuration.epoch)
        }
    }

    /// The scheme and authority clients used, for absolute links in feeds.
    /// How many posts a feed shows: 50, or `?limit=N` (1...20,000).
    static func feedLimit(_ request: Request) -> Int {
        guard let text = request.uri.queryParameters.get("limit"), let limit = Int(text) else { return 50 }
        return min(max(limit, 1), 20_000)
    }

    static func baseURL(_ request: Request, _ state: ServerState) -> String {
        if let authority = request.head.authority { return "http://\(authority)" }
        return "http://\(state.configuration.host):\(state.configuration.port)"
    }

    /// A 200 with validators, or a 304 when the request's validators still match.
    static func conditional(_ request: Request, body: String, contentType: String, lastModified: Date) -> Response {
        let etag = "\"\(fnv1a(body))\""
        let modified = httpDate(lastModified)
        var headers: HTTPFields = [.eTag: etag, .lastModified: modified, .cacheControl: "no-cache"]
        let notModified: Bool
        if let match = request.headers[.ifNoneMatch] {
            notModified = match.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == etag || $0.trimmingCharacters(in: .whitespaces) == "*" }
        } else if let since = request.headers[.ifModifiedSince], let date = parseHTTPDate(since) {
            notModified = floor(lastModified.timeIntervalSince1970) <= date.timeIntervalSince1970
        } else {
            notModified = false
        }
        if notModified {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = contentType
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func fnv1a(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return String(hash, radix: 16)
    }

    private static let httpDateStyle = Date.VerbatimFormatStyle(
        format: "\(weekday: .abbreviated), \(day: .twoDigits) \(month: .abbreviated) \(year: .defaultDigits) \(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits):\(second: .twoDigits) GMT",
        locale: Locale(identifier: "en_US_POSIX"),
        timeZone: .gmt,
        calendar: Calendar(identifier: .gregorian)
    )

    /// An IMF-fixdate (RFC 9110 §5.6.7).
    static func httpDate(_ date: Date) -> String {
        date.formatted(httpDateStyle)
    }

    static func parseHTTPDate(_ text: String) -> Date? {
        try? Date(text, strategy: httpDateStyle.parseStrategy)
    }
}

/// The iTunes top-songs JSON shape: `feed.entry[].title.label`, `link[].attributes.href`.
struct TopSongs: Codable, Sendable {
    struct Label: Codable, Sendable { var label: String }
    struct Link: Codable, Sendable {
        struct Attributes: Codable, Sendable {
            var rel: String
            var href: String
        }
        var attributes: Attributes
    }
    struct Entry: Codable, Sendable {
        var title: Label
        var artist: Label
        var link: [Link]
    }
    struct Feed: Codable, Sendable {
        var title: Label
        var entry: [Entry]
    }
    var feed: Feed

    static let songs = ["Fetch Twice", "Cache Me Outside", "Main Actor Blues", "Lost Connection", "Retry After Midnight", "Offline Again", "Pull to Refresh", "The 304 Song", "Coalesce", "Exit Policy"]
    static let artists = ["The Fetchers", "Cache Money", "Main Actor", "Lost Connection", "Retry After", "Hummingbirds"]

    static func feed(limit: Int, seed: UInt64, baseURL: String) -> TopSongs {
        var random = SplitMix64(seed: seed)
        let entries = (1...limit).map { rank -> Entry in
            let song = songs[Int(random.next() % UInt64(songs.count))]
            let artist = artists[Int(random.next() % UInt64(artists.count))]
            return Entry(
                title: Label(label: "\(song) - \(artist)"),
                artist: Label(label: artist),
                link: [
                    Link(attributes: .init(rel: "alternate", href: "\(baseURL)/songs/\(rank)")),
                    Link(attributes: .init(rel: "enclosure", href: "\(baseURL)/previews/\(rank).m4a")),
                ]
            )
        }
        return TopSongs(feed: Feed(title: Label(label: "Top \(limit) Songs"), entry: entries))
    }
}

extension JSONEncoder {
    /// Stable key order, so the same data gives the same bytes and ETag.
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}
