import Foundation
import Hummingbird
import NIOCore
import Seeded
import Synchronization

/// An OAuth 2-style token endpoint for the CRM routes (RFC 6749 §4.3 and §6):
/// `POST /oauth/token` with a form body, `grant_type=password` (the CRM's user
/// name and password) or `grant_type=refresh_token`, answering
/// `{"access_token", "token_type": "Bearer", "expires_in", "refresh_token"}`.
///
/// Access tokens live ``DemoServer/Configuration/tokenLifetime`` of server
/// time. Refresh tokens rotate: each one is good for one refresh, and a
/// reused or unknown one gets 400 `invalid_grant`.
final class OAuthTokens: Sendable {
    private struct State {
        /// Access token → server time it expires at.
        var access: [String: Duration] = [:]
        var refresh: Set<String> = []
        var random: SplitMix64
    }

    private let state: Mutex<State>
    private let server: ServerState

    init(server: ServerState) {
        self.server = server
        state = Mutex(State(random: SplitMix64(seed: server.configuration.seed &+ 0x0A07)))
    }

    /// Whether `token` is an access token that has not expired.
    func isValid(accessToken token: String) -> Bool {
        let now = server.elapsed
        return state.withLock { state in
            guard let expiry = state.access[token] else { return false }
            return now < expiry
        }
    }

    /// A new access token and refresh token.
    private func issue() -> (access: String, refresh: String, lifetime: Duration) {
        let lifetime = server.configuration.tokenLifetime
        let expiry = server.elapsed + lifetime
        return state.withLock { state in
            let access = "at-" + String(state.random.next(), radix: 36) + String(state.random.next(), radix: 36)
            let refresh = "rt-" + String(state.random.next(), radix: 36) + String(state.random.next(), radix: 36)
            state.access[access] = expiry
            state.refresh.insert(refresh)
            // Forget long-expired access tokens now and then: memory stays bounded.
            if state.access.count > 10_000 {
                let now = expiry - lifetime
                state.access = state.access.filter { $0.value > now }
            }
            return (access, refresh, lifetime)
        }
    }

    /// Uses up `token`: `false` when it was unknown or already used.
    private func redeem(refreshToken token: String) -> Bool {
        state.withLock { $0.refresh.remove(token) != nil }
    }

    static func add(to router: Router<DemoRequestContext>, tokens: OAuthTokens) {
        router.post("/oauth/token") { request, _ in
            var request = request
            let body = try await request.collectBody(upTo: 64 * 1024)
            let fields = FormFields(String(buffer: body))
            let grant = fields["grant_type"] ?? ""
            tokens.server.stats.withLock { $0.tokenGrants[grant.isEmpty ? "(none)" : grant, default: 0] += 1 }
            switch grant {
            case "password":
                guard fields["username"] == SenbeiRoutes.username, fields["password"] == SenbeiRoutes.password else {
                    return try error("invalid_grant", "bad username or password")
                }
            case "refresh_token":
                guard let token = fields["refresh_token"], tokens.redeem(refreshToken: token) else {
                    return try error("invalid_grant", "the refresh token is unknown or was already used")
                }
            default:
                return try error("unsupported_grant_type", "use grant_type=password or grant_type=refresh_token")
            }
            let issued = tokens.issue()
            let answer = TokenAnswer(
                accessToken: issued.access,
                tokenType: "Bearer",
                expiresIn: Double(issued.lifetime.components.seconds) + Double(issued.lifetime.components.attoseconds) / 1e18,
                refreshToken: issued.refresh)
            var response = try SenbeiRoutes.json(answer)
            response.headers[.cacheControl] = "no-store"
            return response
        }
    }

    struct TokenAnswer: Encodable {
        var accessToken: String
        var tokenType: String
        var expiresIn: Double
        var refreshToken: String
    }

    /// RFC 6749 §5.2: 400 with `{"error": …, "error_description": …}`.
    private static func error(_ code: String, _ description: String) throws -> Response {
        var response = try SenbeiRoutes.json(["error": code, "error_description": description], status: .badRequest)
        response.headers[.cacheControl] = "no-store"
        return response
    }
}

/// The fields of an `application/x-www-form-urlencoded` body (the first of each name).
struct FormFields {
    private var fields: [String: String] = [:]

    init(_ body: String) {
        for pair in body.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
            }
            let name = decode(parts[0])
            if fields[name] == nil { fields[name] = parts.count > 1 ? decode(parts[1]) : "" }
        }
    }

    subscript(name: String) -> String? { fields[name] }
}
