import AsyncHTTPClient
@testable import DemoServer
import DepotTesting
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import NIOCore
import Testing

/// The Nerdfeed routes over real HTTP (AsyncHTTPClient against 127.0.0.1).
@Suite(.timeLimit(.minutes(1))) struct NerdfeedRoutesTests {
    struct Fetched {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    /// A client that fails at once on a refused connection instead of retrying.
    static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    func get(_ url: URL, headers: [String: String] = [:]) async throws -> Fetched {
        var request = HTTPClientRequest(url: url.absoluteString)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await Self.client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 10 << 20)
        var fields: [String: String] = [:]
        for (name, value) in response.headers { fields[name.lowercased()] = value }
        return Fetched(status: Int(response.status.code), headers: fields, body: String(buffer: body))
    }

    /// Element names and texts of an XML document, checked to be well-formed.
    final class Outline: NSObject, XMLParserDelegate {
        var elements: [String] = []
        var texts: [String: [String]] = [:]
        private var current = ""
        private var buffer = ""

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            elements.append(name)
            current = name
            buffer = ""
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { buffer += string }

        func parser(_ parser: XMLParser, foundCDATA block: Data) { buffer += String(decoding: block, as: UTF8.self) }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            texts[name, default: []].append(buffer.trimmingCharacters(in: .whitespacesAndNewlines))
            buffer = ""
        }

        static func parse(_ text: String) throws -> Outline {
            let outline = Outline()
            let parser = XMLParser(data: Data(text.utf8))
            parser.delegate = outline
            // On Linux, parse() can return true after a fatal error; parserError is what tells.
            guard parser.parse(), parser.parserError == nil else {
                throw DemoServerError(message: "not well-formed XML: \(String(describing: parser.parserError))")
            }
            return outline
        }
    }

    @Test func rssHasTheForumPostsWithValidatorsAndCDATA() async throws {
        try await DemoServer.withRunning(.init(seed: 7, initialPosts: 20)) { server in
            let rss = try await get(server.baseURL.appendingPathComponent("forum/rss"))
            #expect(rss.status == 200)
            #expect(rss.headers["content-type"]?.hasPrefix("application/rss+xml") == true)
            #expect(rss.headers["etag"]?.hasPrefix("\"") == true)
            #expect(rss.headers["last-modified"]?.hasSuffix("GMT") == true)
            #expect(rss.body.contains("<![CDATA["))
            let outline = try Outline.parse(rss.body)
            #expect(outline.elements.filter { $0 == "item" }.count == 20)
            let titles = try #require(outline.texts["title"]).dropFirst()  // the first is the channel's
            #expect(titles.allSatisfy { $0.hasPrefix("iOS Programming :: ") && $0.components(separatedBy: " :: ").count == 3 })
            #expect(outline.texts["dc:creator"]?.count == 20)
            #expect(outline.texts["description"]?.last?.contains("<b>") == true)  // HTML inside CDATA survives
        }
    }

    @Test func atomHasTheSamePosts() async throws {
        try await DemoServer.withRunning(.init(seed: 7)) { server in
            let atom = try await get(server.baseURL.appendingPathComponent("forum/atom"))
            #expect(atom.status == 200)
            let outline = try Outline.parse(atom.body)
            #expect(outline.elements.filter { $0 == "entry" }.count == 20)
            let rss = try Outline.parse(try await get(server.baseURL.appendingPathComponent("forum/rss")).body)
            #expect(Array(outline.texts["title"]!.dropFirst()) == Array(rss.texts["title"]!.dropFirst()))
        }
    }

    @Test func feedsShowFiftyPostsOrTheLimitAsked() async throws {
        try await DemoServer.withRunning(.init(seed: 7, initialPosts: 300)) { server in
            let standard = try Outline.parse(try await get(server.baseURL.appending(path: "forum/rss")).body)
            #expect(standard.elements.filter { $0 == "item" }.count == 50)
            let more = try Outline.parse(try await get(URL(string: server.baseURL.absoluteString + "/forum/rss?limit=250")!).body)
            #expect(more.elements.filter { $0 == "item" }.count == 250)
            let atom = try Outline.parse(try await get(URL(string: server.baseURL.absoluteString + "/forum/atom?limit=5")!).body)
            #expect(atom.elements.filter { $0 == "entry" }.count == 5)
        }
    }

    @Test func topSongsHaveTheITunesShape() async throws {
        struct Feed: Decodable {
            struct Label: Decodable { var label: String }
            struct Link: Decodable {
                struct Attributes: Decodable { var href: String }
                var attributes: Attributes
            }
            struct Entry: Decodable {
                var title: Label
                var link: [Link]
            }
            struct Inner: Decodable { var entry: [Entry] }
            var feed: Inner
        }
        try await DemoServer.withRunning(.init()) { server in
            let songs = try await get(URL(string: "\(server.baseURL.absoluteString)/topsongs/limit=10/json")!)
            #expect(songs.status == 200)
            let feed = try JSONDecoder().decode(Feed.self, from: Data(songs.body.utf8))
            #expect(feed.feed.entry.count == 10)
            #expect(feed.feed.entry.allSatisfy { $0.link[1].attributes.href.hasSuffix(".m4a") && $0.title.label.contains(" - ") })
            let bad = try await get(URL(string: "\(server.baseURL.absoluteString)/topsongs/limit=0/json")!)
            #expect(bad.status == 404)
        }
    }

    @Test func matchingValidatorsGet304() async throws {
        try await DemoServer.withRunning(.init()) { server in
            let url = server.baseURL.appendingPathComponent("forum/rss")
            let first = try await get(url)
            let etag = try #require(first.headers["etag"])
            let modified = try #require(first.headers["last-modified"])

            let byETag = try await get(url, headers: ["If-None-Match": etag])
            #expect(byETag.status == 304)
            #expect(byETag.body.isEmpty)
            #expect(byETag.headers["etag"] == etag)

            let byDate = try await get(url, headers: ["If-Modified-Since": modified])
            #expect(byDate.status == 304)

            let stale = try await get(url, headers: ["If-None-Match": "\"nope\""])
            #expect(stale.status == 200)
            #expect(server.currentStats.notModified == 2)
            #expect(server.currentStats.requests["GET /forum/rss"] == 4)
        }
    }

    @Test func newPostsAppearAsServerTimePasses() async throws {
        let clock = ManualClock()
        try await DemoServer.withRunning(.init(initialPosts: 5, postInterval: .seconds(60), clock: clock)) { server in
            let url = server.baseURL.appendingPathComponent("forum/rss")
            let before = try await get(url)
            #expect(try Outline.parse(before.body).elements.filter { $0 == "item" }.count == 5)
            clock.advance(by: .seconds(120))
            let after = try await get(url, headers: ["If-None-Match": before.headers["etag"]!])
            #expect(after.status == 200)  // the old ETag no longer matches
            let outline = try Outline.parse(after.body)
            #expect(outline.elements.filter { $0 == "item" }.count == 7)
            // Newest first: the two new posts lead.
            #expect(outline.texts["guid"]?.prefix(3) == ["post-7", "post-6", "post-5"])
        }
    }

    @Test func theSameSeedGivesTheSameBytes() async throws {
        let a = try await DemoServer.withRunning(.init(seed: 42)) { try await get($0.baseURL.appendingPathComponent("forum/atom")).body }
        let b = try await DemoServer.withRunning(.init(seed: 42)) { try await get($0.baseURL.appendingPathComponent("forum/atom")).body }
        let c = try await DemoServer.withRunning(.init(seed: 43)) { try await get($0.baseURL.appendingPathComponent("forum/atom")).body }
        // Links carry the port, which differs per server; compare without it.
        func portless(_ text: String) -> String { text.replacingOccurrences(of: #"127\.0\.0\.1:\d+"#, with: "HOST", options: .regularExpression) }
        #expect(portless(a) == portless(b))
        #expect(portless(a) != portless(c))
    }

    @Test func statsCountRequestsPerRoute() async throws {
        try await DemoServer.withRunning(.init()) { server in
            _ = try await get(URL(string: "\(server.baseURL.absoluteString)/topsongs/limit=3/json")!)
            _ = try await get(URL(string: "\(server.baseURL.absoluteString)/topsongs/limit=4/json")!)
            let stats = try await get(server.baseURL.appendingPathComponent("_stats"))
            let decoded = try JSONDecoder().decode(DemoServer.Stats.self, from: Data(stats.body.utf8))
            #expect(decoded.requests.first { $0.key.hasPrefix("GET /topsongs/") }?.value == 2, "\(decoded.requests)")
            #expect(decoded.bytesSent > 0)
        }
    }

    @Test func startReportsTheBoundPortAndStopReleasesIt() async throws {
        let server = try await DemoServer.start(.init(port: 0))
        #expect(server.port > 0)
        let url = server.baseURL.appendingPathComponent("forum/rss")
        #expect(try await get(url).status == 200)
        await server.stop()
        await #expect(throws: (any Error).self) { _ = try await get(url) }
    }

    @Test func httpDatesRoundTrip() {
        let date = Date(timeIntervalSince1970: 1_767_225_600)
        let text = NerdfeedRoutes.httpDate(date)
        #expect(text == "Thu, 01 Jan 2026 00:00:00 GMT")
        #expect(NerdfeedRoutes.parseHTTPDate(text) == date)
    }
}
