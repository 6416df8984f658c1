import AsyncHTTPClient
@testable import DemoServer
import DepotTesting
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// HEAD on GET routes over real HTTP: the GET's status and headers, no body.
@Suite(.timeLimit(.minutes(1))) struct HeadRequestsTests {
    /// What came back, with every header kept (names lower-cased, in order).
    struct Answer {
        var status: Int
        var headers: [String: [String]]
        var body: Int
    }

    static let auth = ["Authorization": AppRoutesTests.auth]

    func send(_ method: HTTPMethod, _ url: URL, headers: [String: String] = [:], readBody: Bool = true) async throws -> Answer {
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await NerdfeedRoutesTests.client.execute(request, timeout: .seconds(10))
        var fields: [String: [String]] = [:]
        for (name, value) in response.headers { fields[name.lowercased(), default: []].append(value) }
        var received = 0
        for try await chunk in response.body {
            received += chunk.readableBytes
            if !readBody { break }  // an endless body: the head is what matters
        }
        return Answer(status: Int(response.status.code), headers: fields, body: received)
    }

    /// The headers a GET and a HEAD must share: all but `Date`, which may tick between them.
    func comparable(_ answer: Answer) -> [String: [String]] {
        answer.headers.filter { $0.key != "date" }
    }

    /// A server whose clock stands still, so the feeds do not change between the GET and the HEAD.
    static var configuration: DemoServer.Configuration { .init(seed: 7, clock: ManualClock()) }

    @Test(arguments: [
        // Nerdfeed
        ("/forum/rss", [:]),
        ("/topsongs/limit=10/json", [:]),
        // Senbei, with and without credentials
        ("/contacts?per_page=5", auth),
        ("/contacts", [:]),
        // Timeline
        ("/timeline", [:]),
        ("/avatars/3.png", [:]),
        // Faults
        (DemoServer.Fault.status(503).path, [:]),
        (DemoServer.Fault.retryAfter(seconds: 7).path, [:]),
        (DemoServer.Fault.redirectLoop.path, [:]),
        (DemoServer.Fault.bytes(1000).path, [:]),
        // Not a route at all
        ("/no/such/route", [:]),
    ] as [(String, [String: String])])
    func headAnswersLikeGetWithoutABody(path: String, headers: [String: String]) async throws {
        try await DemoServer.withRunning(Self.configuration) { server in
            let url = URL(string: server.baseURL.absoluteString + path)!
            let get = try await send(.GET, url, headers: headers)
            let head = try await send(.HEAD, url, headers: headers)
            #expect(head.status == get.status)
            #expect(comparable(head) == comparable(get))
            #expect(head.body == 0)
            #expect(get.status != 200 || get.body > 0, "the GET has a body to leave out")
            if get.status == 200 {
                #expect(head.headers["content-length"] == ["\(get.body)"])
                #expect(head.headers["content-type"]?.isEmpty == false)
            }
        }
    }

    @Test func feedHeadCarriesTheValidators() async throws {
        try await DemoServer.withRunning(Self.configuration) { server in
            let head = try await send(.HEAD, server.baseURL.appendingPathComponent("forum/rss"))
            #expect(head.status == 200)
            #expect(head.headers["etag"]?.first?.hasPrefix("\"") == true)
            #expect(head.headers["last-modified"]?.first?.hasSuffix("GMT") == true)
            #expect(head.headers["content-type"]?.first?.hasPrefix("application/rss+xml") == true)
            #expect(head.body == 0)
        }
    }

    @Test func conditionalHeadIsNotModified() async throws {
        try await DemoServer.withRunning(Self.configuration) { server in
            let url = server.baseURL.appendingPathComponent("forum/rss")
            let get = try await send(.GET, url)
            let etag = try #require(get.headers["etag"]?.first)
            let head = try await send(.HEAD, url, headers: ["If-None-Match": etag])
            #expect(head.status == 304)
            #expect(head.headers["etag"] == [etag])
            #expect(head.body == 0)
            let stale = try await send(.HEAD, url, headers: ["If-None-Match": "\"other\""])
            #expect(stale.status == 200)
            #expect(server.currentStats.notModified == 1)
        }
    }

    @Test func headOfAnEndlessBodyKeepsItsFramingAndSendsNothing() async throws {
        try await DemoServer.withRunning(Self.configuration) { server in
            let url = server.url(for: .huge)
            let get = try await send(.GET, url, readBody: false)
            let head = try await send(.HEAD, url)
            #expect(head.status == 200)
            #expect(comparable(head) == comparable(get))
            #expect(head.headers["content-length"] == nil)
            #expect(head.headers["transfer-encoding"] == ["chunked"])
            #expect(head.body == 0)
            // Nothing was sent after the head: the next answers on the client's connections parse.
            for _ in 0..<3 {
                let hello = try await send(.GET, server.url(for: .hello))
                #expect(hello.status == 200)
                #expect(hello.body == 19)
            }
        }
    }

    @Test func headIsCountedAsHeadAndSendsNoBytes() async throws {
        try await DemoServer.withRunning(Self.configuration) { server in
            let url = server.baseURL.appendingPathComponent("forum/rss")
            _ = try await send(.HEAD, url)
            let afterHead = server.currentStats
            #expect(afterHead.requests == ["HEAD /forum/rss": 1])
            #expect(afterHead.bytesSent == 0)
            let get = try await send(.GET, url)
            #expect(server.currentStats.requests == ["HEAD /forum/rss": 1, "GET /forum/rss": 1])
            #expect(server.currentStats.bytesSent == get.body)
        }
    }
}
