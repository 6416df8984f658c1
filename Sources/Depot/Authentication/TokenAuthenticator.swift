import Foundation
import Synchronization

/// Bearer-token authentication with refresh, done once for the whole app in
/// the controller: every request to the server's origin gets the current
/// access token, and an expiring or refused token is renewed by ONE refresh,
/// whatever the number of requests that need it.
///
/// - **Before expiry.** A request whose token expires within ``refreshWindow``
///   refreshes it first. A token that lives shorter than twice the window
///   (``TokenCredential/issuedAt`` to `expiresAt`) is refreshed once half its life is gone instead, so
///   a short-lived token is not refreshed before every request.
/// - **On 401.** Requests refused with the token that is still current start
///   one refresh and share it; requests that arrive while it runs wait for it
///   and go out with the new token. Each refused request is retried once with
///   the new token; a second 401 fails it with `.unauthorized`, so nothing loops.
/// - **Refresh refused** (the token endpoint answers 400 or 401): every waiting
///   request fails with `.unauthorized`, the credential is deleted from its
///   storage, the controller emits ``NetworkEvent/Kind/signedOut`` (and posts
///   `.depotSignedOut`), and work for the origin waits in the queue, holding no
///   slot, until ``signIn(_:)`` (work that fails fast, such as a one-shot
///   command's, fails with `.unauthorized` instead).
/// - **Offline during a refresh.** The refresh fails like any request, the
///   credential stays, and the requests wait for the network as they would
///   have anyway; nobody is signed out.
///
/// It only ever touches requests for its own origin that carry no
/// `Authorization` header of their own, and never the token endpoint's.
///
/// For example, with OAuth 2 endpoints:
///
/// ```swift
/// let server = URL(string: "https://crm.example.com")!
/// let tokens = OAuth2TokenEndpoint(url: server.appending(path: "oauth/token"), clientID: "senbei")
/// let authenticator = TokenAuthenticator(for: server, refresher: .oauth2(tokens), storage: keychainStorage)
/// var configuration = NetworkController.Configuration(baseURL: server)
/// configuration.authenticator = authenticator
/// let controller = NetworkController(configuration: configuration)
/// try await authenticator.signIn(controller.perform(tokens.passwordGrant(username: "ann", password: "secret")))
/// ```
public final class TokenAuthenticator: Sendable {
    /// A refresh starts when the token expires within this: 60 seconds.
    public static let defaultRefreshWindow: Duration = .seconds(60)

    /// The origin whose requests get the token.
    public let origin: Origin
    /// How long before the token's expiry a request refreshes it first.
    public let refreshWindow: Duration
    private let refresher: TokenRefresher
    private let storage: any CredentialStorage
    private let exempt: Set<String>
    private let state = Mutex(State())
    /// Controllers to tell about sign-outs and sign-ins: weak, so the
    /// authenticator never keeps a controller alive.
    private let listeners = Mutex<[Listener]>([])

    private struct State {
        var loaded = false
        var credential: TokenCredential?
        /// Bumped by every sign-in and sign-out: a request held for credentials
        /// knows whether a sign-in came after it found none.
        var generation = 0
        var refresh: Task<Result<TokenCredential, DepotError>, Never>?
        var refreshes = 0
        /// Why the session ended, when a refused refresh ended it: what a
        /// request refused after that fails with. Cleared by a sign-in.
        var refusal: DepotError?
    }

    private struct Listener: Sendable {
        weak var controller: NetworkController?
    }

    /// What ``TokenAuthenticator/authenticate(_:context:)`` throws when there is
    /// no credential: the controller holds the request until a sign-in.
    struct SignedOut: Error {
        var generation: Int
        var reason: String
    }

    /// Makes an authenticator for `server`'s origin.
    ///
    /// - Parameters:
    ///   - server: Any URL of the origin whose requests carry the token.
    ///   - refresher: How a credential is renewed (``TokenRefresher/oauth2(_:)`` for OAuth 2).
    ///   - storage: Where the credential is kept between launches (memory only by default).
    ///   - refreshWindow: Refresh this long before expiry (``defaultRefreshWindow``).
    ///   - exempting: URLs (scheme, host, port and path) never touched, such as
    ///     a token endpoint; ``TokenRefresher/oauth2(_:)``'s endpoint is always exempt.
    public init(
        for server: URL,
        refresher: TokenRefresher,
        storage: any CredentialStorage = InMemoryCredentialStorage(),
        refreshWindow: Duration = TokenAuthenticator.defaultRefreshWindow,
        exempting: [URL] = []
    ) {
        self.origin = Origin(server) ?? Origin(URL(string: "invalid://")!)!
        self.refresher = refresher
        self.storage = storage
        self.refreshWindow = max(.zero, refreshWindow)
        self.exempt = Set((exempting + refresher.endpoints).map(Self.exemptKey))
    }

    // MARK: - Credentials

    /// The credential in use, loading it from storage the first time.
    public func currentCredential() async -> TokenCredential? {
        await loadIfNeeded()
        return state.withLock { $0.credential }
    }

    /// Whether there is no credential: never signed in, signed out, or a refresh was refused.
    public var isSignedOut: Bool {
        state.withLock { $0.loaded && $0.credential == nil }
    }

    /// How many refreshes have started since launch (for status screens and tests).
    public var refreshCount: Int { state.withLock { $0.refreshes } }

    /// Starts using `credential`: stores it, lets held work go, and emits
    /// ``NetworkEvent/Kind/signedIn`` on every controller that uses this authenticator.
    public func signIn(_ credential: TokenCredential) async {
        state.withLock { state in
            state.loaded = true
            state.credential = credential
            state.refusal = nil
            // A refresh of the old session may still run: nobody joins it now,
            // and its outcome no longer applies (see `performRefresh`).
            state.refresh = nil
            state.generation += 1
        }
        try? await storage.save(credential)
        for controller in controllers() { controller.credentialsChanged(signedIn: true) }
    }

    /// Forgets the credential (a user's sign-out): deletes it from storage and
    /// emits ``NetworkEvent/Kind/signedOut``; work for the origin waits for the next sign-in.
    public func signOut() async {
        await signOut(reason: "signed out")
    }

    /// Drops the credential and any refresh in one step (so no request can
    /// start another refresh with the refused token), then tells storage and controllers.
    private func signOut(reason: String) async {
        _ = await signOut(reason: reason, ifStill: nil, refusal: nil)
    }

    /// Signs out unless a sign-in or sign-out since `generation` (when given)
    /// made the question moot; then returns what the current credential
    /// means for a waiting request instead.
    private func signOut(reason: String, ifStill generation: Int?, refusal: DepotError?) async -> Result<TokenCredential, DepotError>? {
        let superseded = state.withLock { state -> Result<TokenCredential, DepotError>? in
            if let generation, state.generation != generation { return Self.outcome(of: state.credential, refusal: state.refusal) }
            state.loaded = true
            state.credential = nil
            state.refusal = refusal
            state.refresh = nil
            state.generation += 1
            return nil
        }
        if let superseded { return superseded }
        try? await storage.delete()
        for controller in controllers() { controller.credentialsChanged(signedIn: false, reason: reason) }
        return nil
    }

    /// What a request waiting for a refresh gets when the session changed under it.
    private static func outcome(of credential: TokenCredential?, refusal: DepotError?) -> Result<TokenCredential, DepotError> {
        guard let credential else { return .failure(refusal ?? DepotError(.unauthorized, detail: "signed out")) }
        return .success(credential)
    }

    private func loadIfNeeded() async {
        guard !state.withLock({ $0.loaded }) else { return }
        let stored = try? await storage.load()
        state.withLock { state in
            guard !state.loaded else { return }
            state.loaded = true
            state.credential = stored ?? nil
        }
    }

    // MARK: - Controllers

    /// Called by a controller whose configuration holds this authenticator.
    func attach(_ controller: NetworkController) {
        listeners.withLock { listeners in
            listeners.removeAll { $0.controller == nil }
            listeners.append(Listener(controller: controller))
        }
    }

    private func controllers() -> [NetworkController] {
        listeners.withLock { $0.compactMap(\.controller) }
    }

    /// The current generation, read under the controller's lock when it holds a request.
    var generation: Int { state.withLock { $0.generation } }

    // MARK: - Requests

    /// Whether this authenticator touches `request`.
    func applies(to request: TransportRequest) -> Bool {
        Origin(request.url) == origin && !request.headers.contains("Authorization") && !exempt.contains(Self.exemptKey(request.url))
    }

    /// Adds `Authorization: Bearer …`, refreshing first when the token is about
    /// to expire or a refresh is under way. Throws ``SignedOut`` when there is
    /// no credential, and the refresh's error when a needed refresh failed.
    func authenticate(_ request: inout TransportRequest, context: InterceptorContext) async throws {
        guard applies(to: request) else { return }
        await loadIfNeeded()
        var refreshed = false
        while true {
            let now = context.now
            let (credential, running, generation) = state.withLock { ($0.credential, $0.refresh, $0.generation) }
            if let running {
                let credential = try await running.value.get()
                request.headers["Authorization"] = "Bearer \(credential.accessToken)"
                return
            }
            guard let credential else {
                throw SignedOut(generation: generation, reason: "not signed in: waiting for credentials")
            }
            if !refreshed, credential.refreshToken != nil, credential.expires(within: window(for: credential), of: now) {
                refreshed = true
                _ = try await refresh(replacing: credential, context: context).get()
                continue
            }
            request.headers["Authorization"] = "Bearer \(credential.accessToken)"
            return
        }
    }

    /// How long before its expiry `credential` is refreshed: ``refreshWindow``,
    /// or half the token's life when it lives shorter than twice that.
    private func window(for credential: TokenCredential) -> Duration {
        guard let expiresAt = credential.expiresAt, let issuedAt = credential.issuedAt else { return refreshWindow }
        let life = expiresAt.timeIntervalSince(issuedAt)
        guard life > 0 else { return refreshWindow }
        return min(refreshWindow, .milliseconds(Int64(life * 500)))
    }

    /// On a 401 to a request that carried this authenticator's token: refresh
    /// (once for everyone) and retry once with the new token.
    ///
    /// A 401 counts whether the operation refused it (a failure) or accepts
    /// every status (an outbox delivery: a success whose status is 401).
    func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision {
        guard attempt.outcome.status == 401,
              Origin(attempt.request.url) == origin, !exempt.contains(Self.exemptKey(attempt.request.url)),
              let sent = attempt.request.headers["Authorization"], sent.hasPrefix("Bearer ")
        else { return .proceed }
        // Refused with a token just renewed: refreshing again would loop.
        guard !attempt.followsRefresh else { return .proceed }
        let sentToken = String(sent.dropFirst("Bearer ".count))
        let (current, refusal) = state.withLock { ($0.credential, $0.refusal) }
        guard let current else {
            // Signed out while this request was out: say why, as the requests
            // that waited for the refused refresh do.
            var error = refusal ?? DepotError(.unauthorized, status: 401, detail: "signed out")
            error.operation = attempt.operationName
            return .fail(error)
        }
        // Someone renewed the token since this request went out: just try again.
        if current.accessToken != sentToken { return InterceptorDecision(base: .retryAuthenticated) }
        switch await refresh(replacing: current, context: context) {
        case .success: return InterceptorDecision(base: .retryAuthenticated)
        case .failure(var error):
            error.operation = attempt.operationName
            return .fail(error)
        }
    }

    /// The one refresh that replaces `stale`: joins the running one, starts one,
    /// or returns the credential that already replaced it.
    private func refresh(replacing stale: TokenCredential, context: InterceptorContext) async -> Result<TokenCredential, DepotError> {
        let task = state.withLock { state -> Task<Result<TokenCredential, DepotError>, Never>? in
            if let running = state.refresh { return running }
            if let current = state.credential, current.accessToken != stale.accessToken {
                return nil  // already renewed
            }
            state.refreshes += 1
            let generation = state.generation
            let task = Task { await self.performRefresh(stale, generation: generation, context: context) }
            state.refresh = task
            return task
        }
        guard let task else {
            return state.withLock { Self.outcome(of: $0.credential, refusal: $0.refusal) }
        }
        return await task.value
    }

    /// Runs the refresher and applies its outcome. A refusal (400 or 401 from
    /// the token endpoint, or no refresh token) signs out; any other failure
    /// keeps the credential and is handed to the waiting requests.
    ///
    /// A sign-in or sign-out while it ran (a new `generation`) wins: the
    /// outcome belongs to the session that ended, so it neither replaces the
    /// new credential nor signs the new session out, and the waiting requests
    /// go on with whatever credential is current.
    private func performRefresh(_ stale: TokenCredential, generation: Int, context: InterceptorContext) async -> Result<TokenCredential, DepotError> {
        let outcome: Result<TokenCredential, DepotError>
        if stale.refreshToken == nil {
            outcome = .failure(DepotError(.unauthorized, detail: "the token expired and there is no refresh token"))
        } else {
            do {
                outcome = .success(try await refresher.refresh(stale, TokenRefreshContext(interceptor: context)))
            } catch {
                outcome = .failure(DepotError.wrap(error, operation: "token refresh", fallback: .transport))
            }
        }
        switch outcome {
        case .success(let fresh):
            let superseded = state.withLock { state -> Result<TokenCredential, DepotError>? in
                guard state.generation == generation else { return Self.outcome(of: state.credential, refusal: state.refusal) }
                state.credential = fresh
                state.refresh = nil
                return nil
            }
            if let superseded { return superseded }
            try? await storage.save(fresh)
            for controller in controllers() { controller.credentialsRenewed() }
            return .success(fresh)
        case .failure(let error) where Self.isRefusal(error):
            let refusal = Self.refused(error)
            if let superseded = await signOut(reason: "the refresh was refused", ifStill: generation, refusal: refusal) { return superseded }
            return .failure(refusal)
        case .failure(let error):
            state.withLock { state in
                if state.generation == generation { state.refresh = nil }
            }
            return .failure(error)
        }
    }

    /// What every request that waited for a refused refresh fails with: it
    /// says the user was signed out, and names the token endpoint's answer.
    /// The status is not the request's own, so it is left out of `status`.
    static func refused(_ error: DepotError) -> DepotError {
        let answer: String
        if let status = error.status {
            answer = "the token endpoint answered \(status) \(HTTPStatus.reasonPhrase(status))"
        } else {
            answer = error.detail ?? "\(error.code)"
        }
        return DepotError(.unauthorized, detail: "signed out: the refresh was refused (\(answer))", underlying: error)
    }

    /// 400 (`invalid_grant`) or 401 from the token endpoint, or no refresh token at all.
    private static func isRefusal(_ error: DepotError) -> Bool {
        if let status = error.status { return status == 400 || status == 401 }
        return error.code == .unauthorized
    }

    private static func exemptKey(_ url: URL) -> String {
        let origin = Origin(url)?.description ?? ""
        let path = url.path.isEmpty ? "/" : url.path
        return origin + path
    }
}

/// How a ``TokenAuthenticator`` renews a credential.
///
/// For example, a refresh through an app's own client:
///
/// ```swift
/// let refresher = TokenRefresher { credential, context in
///     var request = TransportRequest(url: tokenURL, method: .post)
///     request.headers["Content-Type"] = "application/json"
///     request.body = try JSONEncoder().encode(["refresh": credential.refreshToken])
///     let response = try await context.send(request)
///     guard response.status == 200 else { throw DepotError.forStatus(response.status, body: response.body) }
///     return try JSONDecoder().decode(TokenCredential.self, from: response.body)
/// }
/// ```
///
/// Contract: throw a `DepotError` with status 400 or 401 when the server
/// refuses the refresh token (that signs out), and any other error when the
/// refresh could not be asked (that keeps the credential).
public struct TokenRefresher: Sendable {
    let refresh: @Sendable (TokenCredential, TokenRefreshContext) async throws -> TokenCredential
    let endpoints: [URL]

    /// Makes a refresher from a function.
    public init(_ refresh: @escaping @Sendable (_ credential: TokenCredential, _ context: TokenRefreshContext) async throws -> TokenCredential) {
        self.refresh = refresh
        self.endpoints = []
    }

    init(endpoints: [URL], _ refresh: @escaping @Sendable (TokenCredential, TokenRefreshContext) async throws -> TokenCredential) {
        self.refresh = refresh
        self.endpoints = endpoints
    }

    /// RFC 6749's `grant_type=refresh_token` at `endpoint`.
    public static func oauth2(_ endpoint: OAuth2TokenEndpoint) -> TokenRefresher {
        TokenRefresher(endpoints: [endpoint.url]) { credential, context in
            guard let refreshToken = credential.refreshToken else {
                throw DepotError(.unauthorized, detail: "no refresh token")
            }
            let response = try await context.send(endpoint.request(["grant_type": "refresh_token", "refresh_token": refreshToken]))
            return try endpoint.credential(from: response, now: context.now, keeping: credential)
        }
    }
}

/// What a refresh may use: the controller's transport, straight (not queued
/// behind the requests that wait for the refresh, not adapted, not retried),
/// and its wall clock.
public struct TokenRefreshContext: Sendable {
    let interceptor: InterceptorContext

    /// The controller's wall clock when the refresh began.
    public var now: Date { interceptor.now }

    /// Sends `request` through the controller's transport, with its body limit
    /// and redirect rules and the default timeouts, and returns the response
    /// whatever its status.
    public func send(_ request: TransportRequest) async throws(DepotError) -> NetworkResponse {
        try await interceptor.send(request)
    }
}
