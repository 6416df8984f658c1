import Depot
import Foundation
import Synchronization

/// A ``/Depot/Transport`` that answers from fixtures by path and records every
/// request: for testing operations through the whole controller without a server.
///
/// Bodies come from files (read through ``/Depot/FileTransport``) or from memory.
/// Set ``isOffline`` to make every request fail the way a refused connection does.
///
/// For example:
///
/// ```swift
/// let transport = FixtureTransport()
/// transport.respond(to: "/topsongs", with: .file(Bundle.module.url(forResource: "songs", withExtension: "json")!))
/// let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://fixtures.test")!, transport: transport))
/// ```
public final class FixtureTransport: Transport {
    /// A canned response.
    public struct Fixture: Sendable {
        enum Body: Sendable {
            case data(Data)
            case file(URL)
        }

        var status: Int
        var headers: HeaderFields
        var body: Body

        /// A response whose body is the file at `url`.
        public static func file(_ url: URL, status: Int = 200, headers: HeaderFields = [:]) -> Fixture {
            Fixture(status: status, headers: headers, body: .file(url))
        }

        /// A response whose body is `data`.
        public static func data(_ data: Data, status: Int = 200, headers: HeaderFields = [:]) -> Fixture {
            Fixture(status: status, headers: headers, body: .data(data))
        }

        /// A response with a status and no body.
        public static func status(_ status: Int, headers: HeaderFields = [:]) -> Fixture {
            Fixture(status: status, headers: headers, body: .data(Data()))
        }
    }

    private struct State {
        var fixtures: [String: Fixture] = [:]
        var fallback: Fixture?
        var requests: [TransportRequest] = []
        var isOffline = false
    }

    private let state = Mutex(State())

    /// Makes a transport with fixtures keyed by URL path (`"/topsongs"`).
    public init(_ fixtures: [String: Fixture] = [:]) {
        state.withLock { $0.fixtures = fixtures }
    }

    /// Answers requests for `path` with `fixture` from now on.
    public func respond(to path: String, with fixture: Fixture) {
        state.withLock { $0.fixtures[path] = fixture }
    }

    /// Answers requests for any path without a fixture of its own with `fixture`.
    public func respondToOtherPaths(with fixture: Fixture) {
        state.withLock { $0.fallback = fixture }
    }

    /// Whether every request fails with ``/Depot/DepotError/Code/offline``.
    public var isOffline: Bool {
        get { state.withLock { $0.isOffline } }
        set { state.withLock { $0.isOffline = newValue } }
    }

    /// Every request sent so far, in order.
    public var requests: [TransportRequest] { state.withLock { $0.requests } }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let (fixture, offline) = state.withLock { state -> (Fixture?, Bool) in
            state.requests.append(request)
            return (state.fixtures[request.url.path] ?? state.fallback, state.isOffline)
        }
        if offline {
            throw DepotError(.offline, detail: "FixtureTransport is offline")
        }
        guard let fixture else {
            return TransportResponse(status: 404, headers: ["Content-Length": "0"], body: .empty)
        }
        switch fixture.body {
        case .data(let data):
            var headers = fixture.headers
            headers["Content-Length"] = "\(data.count)"
            return TransportResponse(status: fixture.status, headers: headers, body: TransportBody(data: data))
        case .file(let url):
            var response = try await FileTransport().send(TransportRequest(url: url))
            guard response.status == 200 else { return response }
            response.status = fixture.status
            for field in fixture.headers { response.headers[field.name] = field.value }
            return response
        }
    }
}
