import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import Foundation
import GRDB
import NerdfeedKit
import Synchronization

/// The committed fixture `name` (in `Fixtures/`).
func fixture(_ name: String) throws -> URL {
    guard let folder = Bundle.module.url(forResource: "Fixtures", withExtension: nil) else {
        throw DepotError(.invalidRequest, detail: "the Fixtures folder is missing from the test bundle")
    }
    return folder.appending(path: name)
}

/// The bytes of the committed fixture `name`.
func fixtureData(_ name: String) throws -> Data {
    try Data(contentsOf: fixture(name))
}

/// An instant written in RFC 3339, for expectations.
func utc(_ text: String) -> Date {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = text.contains(".") ? [.withInternetDateTime, .withFractionalSeconds] : [.withInternetDateTime]
    guard let date = formatter.date(from: text) else { fatalError("bad test date \(text)") }
    return date
}

/// The URL the RSS fixtures pretend to come from.
let forumFeedURL = URL(string: "https://forums.example.com/feeds/rss.xml")!

/// Counts calls from any thread.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}

extension Store {
    /// Every feed item, by feed and identity.
    func allItems() async throws -> [FeedItem] {
        try await read { db in try FeedItem.order(FeedItem.Columns.feed, FeedItem.Columns.id).fetchAll(db) }
    }

    /// The item with this link (the first, by feed).
    func item(_ link: String) async throws -> FeedItem? {
        try await read { db in try FeedItem.filter(FeedItem.Columns.link == link).order(FeedItem.Columns.feed).fetchOne(db) }
    }

    /// The item of `feed` with this identity.
    func item(id: String, feed: String) async throws -> FeedItem? {
        try await read { db in try FeedItem.fetchOne(db, key: ["feed": feed, "id": id]) }
    }
}

/// The items of `feed`, parsed from the document `xml`.
func parse(_ xml: String, baseURL: URL = forumFeedURL) throws -> ParsedFeed {
    try FeedParser.parse(Data(xml.utf8), baseURL: baseURL)
}

/// An RSS 2.0 document of one channel holding `items` (the items' XML).
func rss(_ items: String, namespaces: String = "") -> String {
    #"<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd" xmlns:content="http://purl.org/rss/1.0/modules/content/" "#
        + namespaces + "><channel><title>t</title>" + items + "</channel></rss>"
}

/// An Atom 1.0 document of one feed holding `entries` (the entries' XML).
func atom(_ entries: String, feedLevel: String = "") -> String {
    #"<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>"# + feedLevel + entries + "</feed>"
}

/// Runs `body` with a controller over AsyncHTTPClient for `server` and
/// `store` (`configure` adjusts its configuration), and shuts both down
/// whatever `body` does.
func withController(
    server: DemoServer,
    store: Store,
    isolation: isolated (any Actor)? = #isolation,
    configure: (inout NetworkController.Configuration) -> Void = { _ in },
    _ body: (NetworkController) async throws -> Void
) async throws {
    let transport = AsyncHTTPClientTransport()
    var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: transport)
    configuration.store = store
    configure(&configuration)
    let controller = NetworkController(configuration: configuration)
    do {
        try await body(controller)
    } catch {
        _ = await controller.shutdown(grace: .zero)
        await transport.shutdown()
        throw error
    }
    _ = await controller.shutdown(grace: .zero)
    await transport.shutdown()
}

/// Feeds that ask an XML parser to expand entities without bound.
enum HostileFeeds {
    /// Billion laughs: 10⁹ "lol"s from a 1 KB document.
    static let billionLaughs: String = {
        var laughs = #"<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY lol "lol">"#
        laughs += #"<!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">"#
        for level in 2...9 { laughs += "<!ENTITY lol\(level) \"\(String(repeating: "&lol\(level - 1);", count: 10))\">" }
        laughs += "]><rss version=\"2.0\"><channel><title>&lol9;</title><item><title>&lol9;</title><link>/a</link></item></channel></rss>"
        return laughs
    }()

    /// Quadratic blowup: one 50 KB entity referenced 20,000 times (1 GB
    /// expanded), the references long before the end.
    static let quadraticBlowup: String = {
        let big = String(repeating: "y", count: 50_000)
        return #"<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY big ""# + big + #"">]><rss version="2.0"><channel><item><link>/b</link><title>"#
            + String(repeating: "&big;", count: 20_000) + "</title></item></channel></rss>"
    }()
}
