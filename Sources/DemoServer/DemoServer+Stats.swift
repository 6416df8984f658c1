import Hummingbird

extension DemoServer {
    /// What the server has served, per route.
    public struct Stats: Codable, Sendable, Hashable {
        /// Requests per route pattern, for example `GET /forum/rss` or `HEAD /forum/rss`.
        public var requests: [String: Int] = [:]
        /// Body bytes sent in all.
        public var bytesSent: Int = 0
        /// Responses that were 304 Not Modified.
        public var notModified: Int = 0
        /// `POST /oauth/token` requests by `grant_type` (`password`, `refresh_token`).
        public var tokenGrants: [String: Int] = [:]
        /// Requests that reached a write route with an `Idempotency-Key`, per
        /// key, then per method and path (`PATCH /contacts/3`): replays count,
        /// requests refused before the route (401, `offline`, `failRate`) do not.
        public var idempotencyKeys: [String: [String: Int]] = [:]
    }

    /// A copy of the counters.
    public var currentStats: Stats { state.stats.withLock { $0 } }

    /// How many requests with the `Idempotency-Key` `key` reached each write
    /// route, by method and path: what a test counts to prove that a client
    /// sent a change once (see ``Stats/idempotencyKeys``).
    ///
    /// For example:
    ///
    /// ```swift
    /// #expect(server.deliveries(ofIdempotencyKey: "k-1") == ["PATCH /contacts/3": 1])
    /// ```
    public func deliveries(ofIdempotencyKey key: String) -> [String: Int] {
        state.stats.withLock { $0.idempotencyKeys[key] ?? [:] }
    }
}

/// Counts requests per route and bytes sent.
struct StatsMiddleware: RouterMiddleware {
    typealias Context = DemoRequestContext
    let state: ServerState

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        let method = context.answersHead ? "HEAD" : request.method.rawValue
        let route = "\(method) \(context.endpointPath ?? request.uri.path)"
        // A HEAD gets the GET's headers, never its body.
        let bytes = context.answersHead ? 0 : response.body.contentLength ?? 0
        state.stats.withLock { stats in
            stats.requests[route, default: 0] += 1
            stats.bytesSent += bytes
            if response.status == .notModified { stats.notModified += 1 }
        }
        return response
    }
}
