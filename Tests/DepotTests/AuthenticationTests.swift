import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import Synchronization
import Testing

/// The token authenticator against depot-server's `POST /oauth/token` and its
/// bearer-protected CRM routes, over a real loopback connection. The server's
/// clock is a ManualClock (tokens expire when a test says so) and the client's
/// wall clock a ManualDate (the refresh window is exact).
@Suite struct AuthenticationTests {
    /// One page of contacts: distinct pages are distinct requests (no coalescing).
    struct ListContacts: NetworkOperation {
        typealias Output = NetworkResponse
        var page: Int
        var offlineBehavior: OfflineBehavior = .waitForConnectivity
        var request: NetworkRequest { .get("contacts", query: ["page": "\(page)"]) }
    }

    /// Events of a controller, recorded from the start.
    final class EventLog: Sendable {
        private let recorder: Recorder<NetworkEvent>

        init(_ controller: NetworkController) {
            recorder = Recorder(controller.events())
        }

        func count(_ kind: NetworkEvent.Kind) -> Int { recorder.values.filter { $0.kind == kind }.count }

        /// Waits until `kind` was seen `count` times (failing after the recorder's timeout).
        func wait(for kind: NetworkEvent.Kind, count: Int = 1) async throws {
            while self.count(kind) < count {
                _ = try await recorder.next { $0.kind == kind }
            }
        }
    }

    struct Setup {
        let server: DemoServer
        let serverClock: ManualClock
        let date: ManualDate
        let tokens: OAuth2TokenEndpoint
        let authenticator: TokenAuthenticator
        let controller: NetworkController
        let log: EventLog

        /// Signs in with the demo CRM's password.
        func signIn() async throws {
            await authenticator.signIn(try await controller.perform(tokens.passwordGrant(username: "admin", password: "secret")))
        }

        var refreshesSeenByServer: Int { server.currentStats.tokenGrants["refresh_token"] ?? 0 }
    }

    func withSetup(
        refresher: ((OAuth2TokenEndpoint) -> TokenRefresher)? = nil,
        refreshWindow: Duration = .zero,
        tokenLifetime: Duration = .seconds(3600),
        configure: (inout NetworkController.Configuration) -> Void = { _ in },
        _ body: (Setup) async throws -> Void
    ) async throws {
        let serverClock = ManualClock()
        try await DemoServer.withRunning(.init(host: "127.0.0.1", port: 0, clock: serverClock, tokenLifetime: tokenLifetime)) { server in
            let date = ManualDate()
            let tokens = OAuth2TokenEndpoint(url: server.baseURL.appending(path: "oauth/token"), clientID: "tests")
            let authenticator = TokenAuthenticator(for: server.baseURL, refresher: refresher?(tokens) ?? .oauth2(tokens), refreshWindow: refreshWindow, exempting: [tokens.url])
            try await withController(AsyncHTTPClientTransport(), baseURL: server.baseURL, configure: { configuration in
                configuration.authenticator = authenticator
                configuration.environment.date = date.provider
                configuration.limits.concurrency = .fixed(20)
                configure(&configuration)
            }) { controller in
                let log = EventLog(controller)
                try await body(Setup(server: server, serverClock: serverClock, date: date, tokens: tokens, authenticator: authenticator, controller: controller, log: log))
            }
        }
    }

    /// Runs `count` page fetches at once and returns their results.
    func fetchPages(_ count: Int, on controller: NetworkController, from first: Int = 1) async -> [Result<NetworkResponse, DepotError>] {
        await withTaskGroup(of: Result<NetworkResponse, DepotError>.self) { group in
            for page in first..<(first + count) {
                group.addTask {
                    do { return .success(try await controller.perform(ListContacts(page: page))) } catch { return .failure(error as? DepotError ?? DepotError(.transport, underlying: error)) }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    // MARK: - Refresh

    @Test func twentyRequestsRefusedTogetherMakeOneRefresh() async throws {
        try await withSetup { setup in
            try await setup.signIn()
            // Given the server says the token expired (the client's clock does not know)
            setup.serverClock.advance(by: .seconds(3601))

            // When twenty requests go out together
            let results = await fetchPages(20, on: setup.controller)

            // Then they all succeed after ONE refresh
            #expect(results.allSatisfy { (try? $0.get().status) == 200 })
            #expect(setup.refreshesSeenByServer == 1)
            #expect(setup.authenticator.refreshCount == 1)
            #expect(setup.log.count(.signedOut) == 0)
        }
    }

    @Test func requestsDuringARefreshWaitForItAndUseTheNewToken() async throws {
        let gate = AsyncGate()
        try await withSetup(refresher: { tokens in
            let oauth2 = TokenRefresher.oauth2(tokens)
            return TokenRefresher { credential, context in
                await gate.enterAndWait()
                return try await oauth2.refresh(credential, context)
            }
        }) { setup in
            try await setup.signIn()
            setup.serverClock.advance(by: .seconds(3601))

            // Given a refresh under way, started by one refused request
            async let first = setup.controller.perform(ListContacts(page: 1))
            await gate.waitUntilEntered()

            // When five more requests start while it runs
            async let more = fetchPages(5, on: setup.controller, from: 2)
            try await setup.log.wait(for: .started, count: 6)
            gate.open()

            // Then none of them was sent with the old token: only the first was retried
            #expect(try await first.status == 200)
            #expect(await more.allSatisfy { (try? $0.get().status) == 200 })
            #expect(setup.log.count(.retried) == 1)
            #expect(setup.refreshesSeenByServer == 1)
        }
    }

    /// A sign-in while the old session's refresh is on the wire wins, however
    /// that refresh ends: it neither signs the new session out nor replaces its token.
    @Test(arguments: [true, false])
    func aSignInDuringAnOldRefreshWins(oldRefreshIsRefused: Bool) async throws {
        let gate = AsyncGate()
        try await withSetup(refresher: { _ in
            TokenRefresher { _, _ in
                await gate.enterAndWait()
                if oldRefreshIsRefused { throw DepotError(.unauthorized, status: 400, detail: "invalid_grant") }
                return TokenCredential(accessToken: "from-the-old-session", refreshToken: "old")
            }
        }) { setup in
            try await setup.signIn()
            setup.serverClock.advance(by: .seconds(3601))

            // Given a refused request whose refresh is under way
            async let first = setup.controller.perform(ListContacts(page: 1))
            await gate.waitUntilEntered()

            // When the user signs in again meanwhile, and then the old refresh ends
            try await setup.signIn()
            let signedIn = try #require(await setup.authenticator.currentCredential())
            gate.open()

            // Then the request goes on with the new session's token, which stays
            #expect(try await first.status == 200)
            #expect(await setup.authenticator.currentCredential() == signedIn)
            #expect(!setup.authenticator.isSignedOut)
            #expect(setup.log.count(.signedOut) == 0)
        }
    }

    /// A token that lives 30 s under a 60 s window is refreshed once half its
    /// life is gone, not before every request.
    @Test func aShortLivedTokenIsRefreshedAtHalfItsLifeNotBeforeEveryRequest() async throws {
        try await withSetup(refreshWindow: .seconds(60), tokenLifetime: .seconds(30)) { setup in
            try await setup.signIn()
            // Five requests while the token is young: no refresh
            for page in 1...5 { #expect(try await setup.controller.perform(ListContacts(page: page)).status == 200) }
            #expect(setup.authenticator.refreshCount == 0)

            // 20 s later, two thirds of its life gone: one refresh, then none for the next five
            setup.date.advance(by: 20)
            setup.serverClock.advance(by: .seconds(20))
            for page in 6...10 { #expect(try await setup.controller.perform(ListContacts(page: page)).status == 200) }
            #expect(setup.authenticator.refreshCount == 1)
            #expect(setup.refreshesSeenByServer == 1)
        }
    }

    @Test func aTokenAboutToExpireIsRefreshedBeforeTheRequest() async throws {
        try await withSetup(refreshWindow: .seconds(60)) { setup in
            try await setup.signIn()
            // Given a token that expires in 30 s, inside the 60 s window
            setup.date.advance(by: 3600 - 30)

            // When a request goes out, it refreshes first and is never refused
            #expect(try await setup.controller.perform(ListContacts(page: 1)).status == 200)
            #expect(setup.refreshesSeenByServer == 1)
            #expect(setup.log.count(.retried) == 0)
            // And the new token is used from then on
            #expect(try await setup.controller.perform(ListContacts(page: 2)).status == 200)
            #expect(setup.refreshesSeenByServer == 1)
        }
    }

    @Test func aTokenRefusedAgainAfterItsRefreshFailsWithoutLooping() async throws {
        try await withSetup(refresher: { _ in
            // A refresh that "succeeds" with a token the server does not know.
            TokenRefresher { _, _ in TokenCredential(accessToken: "not-a-token", refreshToken: "r") }
        }) { setup in
            try await setup.signIn()
            setup.serverClock.advance(by: .seconds(3601))

            let error = await DepotError.from { _ = try await setup.controller.perform(ListContacts(page: 1)) }
            #expect(error?.code == .unauthorized)
            #expect(error?.status == 401)
            #expect(setup.authenticator.refreshCount == 1)
            #expect(setup.log.count(.retried) == 1)
        }
    }

    // MARK: - Sign-out

    @Test func aRefusedRefreshSignsOutOnceAndHoldsLaterWorkUntilSignIn() async throws {
        let center = NotificationCenter()
        let signedOut = Counter()
        let observer = center.addObserver(forName: .depotSignedOut, object: nil, queue: nil) { _ in signedOut.increment() }
        defer { center.removeObserver(observer) }
        try await withSetup(configure: { $0.observability.notificationCenter = center }) { setup in
            try await setup.signIn()
            // Given a refresh token that was used elsewhere (rotation makes it worthless)
            let stale = try #require(await setup.authenticator.currentCredential()?.refreshToken)
            var reuse = TransportRequest(url: setup.tokens.url, method: .post)
            reuse.headers["Content-Type"] = "application/x-www-form-urlencoded"
            reuse.body = Data("grant_type=refresh_token&refresh_token=\(stale)".utf8)
            #expect(try await AsyncHTTPClientTransport().send(reuse).status == 200)
            setup.serverClock.advance(by: .seconds(3601))

            // When three requests are refused and the refresh is refused too
            let results = await fetchPages(3, on: setup.controller)

            // Then each fails with .unauthorized, after ONE refresh, and the app hears it once
            #expect(results.allSatisfy { $0.error?.code == .unauthorized })
            // And each says so, naming the token endpoint's answer rather than passing it off as its own
            for result in results {
                let error = try #require(result.error)
                #expect(error.status == nil)
                #expect(error.description.contains("signed out: the refresh was refused (the token endpoint answered 400 Bad Request)"), "\(error)")
            }
            #expect(setup.authenticator.refreshCount == 1)
            #expect(setup.refreshesSeenByServer == 2)  // ours above, and the refused one
            try await setup.log.wait(for: .signedOut)
            #expect(setup.log.count(.signedOut) == 1)
            #expect(signedOut.value == 1)
            #expect(setup.authenticator.isSignedOut)

            // And later work waits for credentials, holding no slot; fail-fast work fails at once
            let controller = setup.controller
            let held = Task { try await controller.perform(ListContacts(page: 9)) }
            try await setup.log.wait(for: .waitingForCredentials)
            #expect(setup.controller.heldForCredentials == 1)
            #expect(setup.controller.activity.running == 0)
            let failFast = await DepotError.from { _ = try await setup.controller.perform(ListContacts(page: 10, offlineBehavior: .failFast)) }
            #expect(failFast?.code == .unauthorized)

            // When the user signs in again, the held request goes out and succeeds
            try await setup.signIn()
            #expect(try await held.value.status == 200)
            #expect(setup.log.count(.signedIn) == 2)
            #expect(setup.controller.heldForCredentials == 0)
        }
    }

    @Test func noNetworkDuringARefreshWaitsInsteadOfSigningOut() async throws {
        let failures = Mutex(1)
        try await withSetup(refresher: { tokens in
            let oauth2 = TokenRefresher.oauth2(tokens)
            return TokenRefresher { credential, context in
                let offline = failures.withLock { count -> Bool in
                    defer { count -= 1 }
                    return count > 0
                }
                if offline { throw DepotError(.offline, detail: "no route to the token endpoint") }
                return try await oauth2.refresh(credential, context)
            }
        }, configure: { $0.conditions.probeBackoff = .milliseconds(10) ... .milliseconds(10) }) { setup in
            try await setup.signIn()
            setup.serverClock.advance(by: .seconds(3601))

            // When the refresh finds no network, the request waits for it like any GET
            #expect(try await setup.controller.perform(ListContacts(page: 1)).status == 200)
            #expect(setup.log.count(.waitingForNetwork) == 1)
            // And nobody was signed out; the second refresh succeeded
            #expect(setup.log.count(.signedOut) == 0)
            #expect(setup.authenticator.refreshCount == 2)
            #expect(setup.refreshesSeenByServer == 1)
        }
    }

    @Test func otherOriginsAndOwnAuthorizationAreNeverTouched() async throws {
        let authenticator = TokenAuthenticator(for: URL(string: "https://api.example.com")!, refresher: TokenRefresher { credential, _ in credential })
        await authenticator.signIn(TokenCredential(accessToken: "secret-token"))
        let context = InterceptorContext()
        var elsewhere = TransportRequest(url: URL(string: "https://cdn.example.com/a.png")!)
        try await authenticator.authenticate(&elsewhere, context: context)
        #expect(elsewhere.headers["Authorization"] == nil)
        var own = TransportRequest(url: URL(string: "https://api.example.com/x")!, headers: ["Authorization": "Basic abc"])
        try await authenticator.authenticate(&own, context: context)
        #expect(own.headers["Authorization"] == "Basic abc")
        var mine = TransportRequest(url: URL(string: "https://api.example.com:443/x")!)
        try await authenticator.authenticate(&mine, context: context)
        #expect(mine.headers["Authorization"] == "Bearer secret-token")
    }

    @Test func credentialsNeverPrintTheirTokens() {
        let credential = TokenCredential(accessToken: "access-SECRET", refreshToken: "refresh-SECRET", expiresAt: Date(timeIntervalSince1970: 0))
        var dumped = ""
        dump(credential, to: &dumped)
        for text in [credential.description, credential.debugDescription, "\(credential)", String(reflecting: credential), dumped] {
            #expect(!text.contains("SECRET"), "\(text)")
        }
    }
}

/// A gate a refresher waits at until the test opens it.
final class AsyncGate: Sendable {
    private struct State {
        var entered = false
        var open = false
        /// Those waiting at the gate for it to open.
        var waiters: [CheckedContinuation<Void, Never>] = []
        /// Those waiting for someone to enter.
        var watchers: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func enterAndWait() async {
        await withCheckedContinuation { continuation in
            let (resume, watchers) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                state.entered = true
                defer { state.watchers = [] }
                if state.open { return (true, state.watchers) }
                state.waiters.append(continuation)
                return (false, state.watchers)
            }
            for watcher in watchers { watcher.resume() }
            if resume { continuation.resume() }
        }
    }

    /// Returns once someone has entered the gate.
    func waitUntilEntered() async {
        await withCheckedContinuation { continuation in
            let entered = state.withLock { state -> Bool in
                if state.entered { return true }
                state.watchers.append(continuation)
                return false
            }
            if entered { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Counts calls from any thread.
final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() { count.withLock { $0 += 1 } }
}

extension Result where Failure == DepotError {
    var error: DepotError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
