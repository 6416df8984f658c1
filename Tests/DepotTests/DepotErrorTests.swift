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
