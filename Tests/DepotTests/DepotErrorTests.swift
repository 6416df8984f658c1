@testable import Depot
import Foundation
import Testing

@Suite struct DepotErrorTests {
    @Test func describesAServerFailureInOneSentence() {
        let error = DepotError.forStatus(503, body: Data("maintenance".utf8), operation: "FetchTimeline")
        #expect(error.code == .server)
        #expect(error.description == #"FetchTimeline failed: server answered 503 Service Unavailable (body: "maintenance")"#)
    }

    /// The standard phrases, as RFC 9110 spells them (a type rename once reached two).
    @Test func reasonPhrasesAreTheStandardOnes() {
        #expect(HTTPStatus.reasonPhrase(400) == "Bad Request")
        #expect(HTTPStatus.reasonPhrase(408) == "Request Timeout")
        for status in 100...599 {
            #expect(!HTTPStatus.reasonPhrase(status).contains("Network"), "\(status)")
        }
    }

    @Test func mapsStatusesByDefault() {
        #expect(DepotError.forStatus(401).code == .unauthorized)
        #expect(DepotError.forStatus(403).code == .unauthorized)
        #expect(DepotError.forStatus(404).code == .notFound)
        #expect(DepotError.forStatus(500).code == .server)
        #expect(DepotError.forStatus(599).code == .server)
        #expect(DepotError.forStatus(409).code == .unexpectedStatus)
        #expect(DepotError.forStatus(302).code == .unexpectedStatus)
    }

    @Test func excerptIsShortAndClean() {
        let body = Data(("line one\nline two\t" + String(repeating: "x", count: 500)).utf8)
        let excerpt = try! #require(DepotError.excerpt(of: body))
        #expect(excerpt.count == 200)
        #expect(!excerpt.contains("\n"))
        #expect(DepotError.excerpt(of: Data()) == nil)
    }

    /// An offline error whose cause is long (NIO's connection errors list every
    /// address tried) is cut, and the brackets it cut open are closed again.
    @Test func aLongUnderlyingErrorIsCutWithBalancedBrackets() {
        struct Long: Error, CustomStringConvertible {
            var description: String {
                "NIOConnectionError(host: \"127.0.0.1\", port: 9, connectionErrors: [SingleConnectionFailure(target: [IPv4]127.0.0.1/127.0.0.1:9, error: connection reset (error set): Connection refused (errno: 111)), "
                    + String(repeating: "more ", count: 40) + ")])"
            }
        }
        let error = DepotError(.offline, operation: "FetchFeed", underlying: Long())
        let text = error.description
        #expect(text.hasPrefix("FetchFeed failed: host unreachable (offline) (NIOConnectionError(host:"))
        #expect(text.contains("…"))
        var depth = 0
        for character in text {
            if "([{".contains(character) { depth += 1 }
            if ")]}".contains(character) { depth -= 1 }
            #expect(depth >= 0, "\(text)")
        }
        #expect(depth == 0, "\(text)")
        // A short cause is kept whole.
        #expect(DepotError(.offline, underlying: URLError(.notConnectedToInternet)).description.hasSuffix(")"))
        #expect(DepotError.clipped("(short)", limit: 160) == "(short)")
    }

    @Test func keepsTheUnderlyingError() {
        let cause = URLError(.cannotConnectToHost)
        let error = URLSessionTransport.map(cause)
        #expect(error.code == .offline)
        #expect((error.underlying as? URLError)?.code == .cannotConnectToHost)
        let dependent = DepotError(.dependencyFailed, operation: "Sync", underlying: DepotError.forStatus(401, operation: "Login"))
        #expect(dependent.description == "Sync failed: a dependency failed: Login failed: server answered 401 Unauthorized")
    }

    @Test func wrapsForeignErrors() {
        struct Oops: Error {}
        #expect(DepotError.wrap(CancellationError(), operation: "A", fallback: .processing).code == .cancelled)
        #expect(DepotError.wrap(Oops(), operation: "A", fallback: .processing).code == .processing)
        #expect(DepotError.wrap(DepotError(.offline), operation: "A", fallback: .processing).operation == "A")
    }
}
