import AsyncHTTPClient
@testable import DemoServer
import DepotTesting
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import NIOCore
import Testing

/// Every fault route over real HTTP.
@Suite(.timeLimit(.minutes(1))) struct FaultRoutesTests {
    let client = NerdfeedRoutesTests.client

    func get(_ url: URL, headers: [String: String] = [:], limit: Int = 10 << 20) async throws -> NerdfeedRoutesTests.Fetched {
        try await NerdfeedRoutesTests().get(url, headers: headers)
    }

    @Test func statusAnswersTheCode() async throws {
        try await DemoServer.withRunning { server in
            for code in [401, 404, 418, 500, 503] {
                let response = try await get(server.url(for: .status(code)))
                #expect(response.status == code)
                #expect(response.body == "status \(code)")
            }
        }
    }

    /// `/faults/bytes` answers one byte range as RFC 9110 says, over real HTTP.
    @Test(arguments: [
        // Range, If-Range → status, body bytes, Content-Range.
        ("bytes=0-99", nil, 206, 100, "bytes 0-99/1000"),
        ("bytes=900-", nil, 206, 100, "bytes 900-999/1000"),
        ("bytes=-10", nil, 206, 10, "bytes 990-999/1000"),
        ("bytes=990-5000", "\"b1000\"", 206, 10, "bytes 990-999/1000"),
        ("bytes=0-99", "\"other\"", 200, 1000, nil),
        ("bytes=1000-1001", nil, 416, 0, "bytes */1000"),
        ("bytes=5-3", nil, 200, 1000, nil),
        ("bytes=0-1,5-6", nil, 200, 1000, nil),
        ("items=0-1", nil, 200, 1000, nil),
    ] as [(String, String?, Int, Int, String?)])
    func bytesAnswerOneByteRange(range: String, ifRange: String?, status: Int, bytes: Int, contentRange: String?) async throws {
        try await DemoServer.withRunning { server in
            var headers = ["Range": range]
            if let ifRange { headers["If-Range"] = ifRange }
            let response = try await get(server.url(for: .bytes(1000)), headers: headers)
            #expect(response.status == status)
            #expect(response.body.utf8.count == bytes)
            #expect(response.headers["content-range"] == contentRange)
            #expect(response.headers["etag"] == "\"b1000\"")
        }
    }

    @Test func retryAfterInSecondsAndAsADate() async throws {
        try await DemoServer.withRunning(.init(epoch: Date(timeIntervalSince1970: 1_767_225_600), clock: ManualClock())) { server in
            let seconds = try await get(server.url(for: .retryAfter(seconds: 7)))
            #expect(seconds.status == 503)
            #expect(seconds.headers["retry-after"] == "7")
            let date = try await get(server.url(for: .retryAfter(seconds: 30, asDate: true)))
            #expect(date.headers["retry-after"] == "Thu, 01 Jan 2026 00:00:30 GMT")
        }
    }

    @Test func redirectsPointWhereTheySay() async throws {
        try await DemoServer.withRunning { server in
            let loop = try await get(server.url(for: .redirectLoop))
            #expect(loop.status == 302)
            #expect(loop.headers["location"] == "/faults/redirect-loop")
            let toHTTP = try await get(server.url(for: .redirectToHTTP))
            #expect(toHTTP.headers["location"]?.hasPrefix("http://") == true)
        }
    }

    @Test func crossOriginRedirectGoesToAnotherPortThatRecordsHeaders() async throws {
        try await DemoServer.withRunning { server in
            let redirect = try await get(server.url(for: .redirectCrossOrigin))
            let location = try #require(redirect.headers["location"].flatMap(URL.init(string:)))
            #expect(location.port != server.port)
            #expect(server.crossOriginHeaders == nil)
            _ = try await get(location, headers: ["Authorization": "Bearer x", "X-Trace": "1"])
            #expect(server.crossOriginHeaders?["authorization"] == "Bearer x")
            #expect(server.crossOriginHeaders?["x-trace"] == "1")
        }
    }

    @Test func dripPacesBytesOnTheServersClock() async throws {
        let clock = ManualClock()
        try await DemoServer.withRunning(.init(clock: clock)) { server in
            let download = Task { try await get(server.url(for: .drip(bytes: 3, every: .seconds(2)))) }
            for _ in 0..<3 {
                await clock.sleepers(atLeast: 1)  // the server waits for the next byte
                clock.advance(by: .seconds(2))
            }
            let response = try await download.value
            #expect(response.body == "...")
            #expect(clock.elapsed == .seconds(6))
        }
    }

    @Test func resetAndTruncatedBodiesFailTheClient() async throws {
        try await DemoServer.withRunning { server in
            await #expect(throws: (any Error).self) { _ = try await get(server.url(for: .resetMidBody)) }
            await #expect(throws: (any Error).self) { _ = try await get(server.url(for: .truncated)) }
        }
    }

    @Test func hugeKeepsStreaming() async throws {
        try await DemoServer.withRunning { server in
            let response = try await client.execute(HTTPClientRequest(url: server.url(for: .huge).absoluteString), timeout: .seconds(10))
            var received = 0
            for try await chunk in response.body {
                received += chunk.readableBytes
                if received > 1 << 20 { break }  // more than a megabyte and still going
            }
            #expect(received > 1 << 20)
            #expect(response.headers["content-length"].isEmpty)
        }
    }

    @Test func malformedBodiesAreMalformed() async throws {
        try await DemoServer.withRunning { server in
            let json = try await get(server.url(for: .malformedJSON(validItems: 500)))
            #expect(json.body.hasPrefix(#"[{"id":0,"#))
            #expect(json.body.components(separatedBy: #""title":"#).count == 501)
            #expect(throws: (any Error).self) { try JSONSerialization.jsonObject(with: Data(json.body.utf8)) }

            let xml = try await get(server.url(for: .malformedXML))
            // On Linux, XMLParser.parse() can return true on a fatal error; parserError tells.
            let parser = XMLParser(data: Data(xml.body.utf8))
            let parsed = parser.parse()
            #expect(!parsed || parser.parserError != nil)
            #expect(throws: (any Error).self) { _ = try NerdfeedRoutesTests.Outline.parse(xml.body) }
        }
    }

    @Test func hostileXMLIsServedAsIs() async throws {
        try await DemoServer.withRunning { server in
            let laughs = try await get(server.url(for: .xmlBillionLaughs))
            #expect(laughs.body.contains("<!ENTITY lol9"))
            #expect(laughs.body.utf8.count < 2000)  // small on the wire, huge when expanded
            let external = try await get(server.url(for: .xmlExternalEntity))
            #expect(external.body.contains(#"SYSTEM "file:///etc/passwd""#))
        }
    }

    @Test func wrongContentTypeAndEmpty() async throws {
        try await DemoServer.withRunning { server in
            let wrong = try await get(server.url(for: .wrongContentType))
            #expect(wrong.headers["content-type"]?.hasPrefix("text/html") == true)
            #expect(wrong.body.hasPrefix("{"))
            let empty = try await get(server.url(for: .empty))
            #expect(empty.status == 200)
            #expect(empty.body.isEmpty)
        }
    }

    @Test func cacheHeadersAnswersTheHeadersAskedForAndA304ToItsETag() async throws {
        try await DemoServer.withRunning { server in
            let fault = DemoServer.Fault.cacheHeaders("t", cacheControl: "max-age=60, no-cache=\"a, b\"", age: 5, expires: .verbatim("0"))
            let full = try await get(server.url(for: fault))
            #expect(full.status == 200)
            #expect(full.body == #"{"message":"hello"}"#)
            #expect(full.headers["cache-control"] == "max-age=60, no-cache=\"a, b\"")
            #expect(full.headers["age"] == "5")
            #expect(full.headers["expires"] == "0")
            #expect(full.headers["etag"] == DemoServer.cacheHeadersETag)

            let notModified = try await get(server.url(for: fault), headers: ["If-None-Match": DemoServer.cacheHeadersETag])
            #expect(notModified.status == 304)
            #expect(notModified.headers["cache-control"] == "max-age=60, no-cache=\"a, b\"")
            #expect(server.requestCount(for: fault) == 2)

            // Expires counts from the response's Date, which Hummingbird stamps
            // from a clock it reads once a second: under load the two may be
            // a second or two apart (CI once saw 122 s).
            let dated = try await get(server.url(for: .cacheHeaders("d", expires: .secondsAfterDate(120))))
            let date = try #require(dated.headers["date"].flatMap(NerdfeedRoutes.parseHTTPDate))
            let expires = try #require(dated.headers["expires"].flatMap(NerdfeedRoutes.parseHTTPDate))
            #expect((117...123).contains(expires.timeIntervalSince(date)))
            #expect(dated.headers["cache-control"] == nil)
        }
    }
}
