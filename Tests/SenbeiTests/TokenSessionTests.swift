import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// Senbei's session on expiring tokens, against depot-server's
/// `POST /oauth/token`: the controller's authenticator renews the token once
/// for everyone, before it expires or when it is refused, and the user never
/// sees it. The server's clock is a `ManualClock` (tokens expire when a test
/// says so) and the client's wall clock a `ManualDate`.
@Suite(.timeLimit(.minutes(2)))
@MainActor
struct TokenSessionTests {
    /// Twenty pages: five lists, four pages each (distinct requests, never coalesced).
    static let twentyPages: [(EntityKind, Int)] = EntityKind.allCases.flatMap { kind in (1...4).map { (kind, $0) } }

    @Test func twentyRequestsInFlightWhenTheTokenExpiresShareOneRefresh() async throws {
        let serverClock = ManualClock()
        var pool = AsyncHTTPClientTransport.defaultConfiguration
        pool.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 32
        try await withSenbei(serverClock: serverClock, transport: AsyncHTTPClientTransport(configuration: pool), configure: {
            $0.limits.concurrency = .fixed(20)
        }) { f in
            try await f.app.login()
            try await f.control(route: nil, latencyMs: 1000)

            // Given twenty page fetches in flight, every one held by the server
            let fetches = Self.twentyPages.map { kind, page in Task { try await f.app.loadPage(kind, page: page, refresh: true) } }
            await serverClock.sleepers(atLeast: 20)

            // When the token expires before the server looks at any of them
            serverClock.advance(by: .seconds(3601))
            let drainer = ServerClockDrainer.start(serverClock)
            var pages: [EntityPage] = []
            for fetch in fetches { pages.append(try await fetch.value) }
            await ServerClockDrainer.stop(drainer, on: serverClock)

            // Then all twenty were refused, ONE refresh renewed the token, and each succeeded on its retry
            #expect(f.tokenGrants("refresh_token") == 1)
            #expect(f.app.authenticator.refreshCount == 1)
            #expect(pages.count == 20 && pages.allSatisfy { $0.source == .network })
            #expect(f.served("GET /") - f.served("GET /profile") == 40, "each page twice: refused, then accepted")
            #expect(!f.log.names.contains(.senbeiDidFailLogin) && !f.log.names.contains(.senbeiDidFailWithError), "\(f.log.names)")
            #expect(f.tokenGrants("password") == 1)
        }
    }

    /// How the client learns that its token is old.
    enum Expiry: String, CaseIterable, CustomTestStringConvertible {
        /// Its wall clock moves with the server's: each request within the
        /// refresh window (60 s, longer than the token's 2 s) renews it first.
        case beforeExpiry
        /// Its wall clock stands still: the server's 401 tells it.
        case onRefusal

        var testDescription: String { rawValue }
    }

    /// The "done when": with a 2-second token lifetime, ten page
    /// fetches, a second of server time apart, cross several refreshes, with
    /// no sign-in prompt (no second password grant, no failed login) and no
    /// failed page.
    @Test(arguments: Expiry.allCases)
    func tenPagesWithTwoSecondTokensCrossSeveralRefreshes(_ expiry: Expiry) async throws {
        let serverClock = ManualClock()
        let date = ManualDate()
        try await withSenbei(server: .init(seed: 7, tokenLifetime: .seconds(2)), serverClock: serverClock, date: date, configure: { configuration in
            guard expiry == .onRefusal, let server = configuration.baseURL else { return }
            configuration.authenticator = TokenAuthenticator(for: server, refresher: .oauth2(SenbeiApp.tokenEndpoint(for: server)), refreshWindow: .zero)
        }) { f in
            try await f.app.login()
            var pages: [EntityPage] = []
            for fetch in 0..<10 {
                let kind: EntityKind = fetch.isMultiple(of: 2) ? .contacts : .leads
                pages.append(try await f.app.loadPage(kind, page: fetch / 2 % 3 + 1, refresh: true))
                serverClock.advance(by: .seconds(1))
                if expiry == .beforeExpiry { date.advance(by: 1) }
            }
            #expect(pages.count == 10 && pages.allSatisfy { $0.source == .network && !$0.items.isEmpty })
            #expect(f.tokenGrants("refresh_token") >= 3, "\(f.server.currentStats.tokenGrants)")
            // Renewed ahead, no page is refused; renewed on refusal, each refusal costs one more request.
            let pageRequests = f.served("GET /contacts") + f.served("GET /leads")
            #expect(pageRequests == 10 + (expiry == .onRefusal ? f.tokenGrants("refresh_token") : 0), "\(pageRequests) requests")
            #expect(f.tokenGrants("password") == 1, "never asked to sign in again")
            #expect(f.log.names.filter { $0 == .senbeiDidFailLogin || $0 == .senbeiDidFailWithError }.isEmpty, "\(f.log.names)")
            #expect(f.log.names.filter { $0 == .senbeiDidLogin }.count == 1)
        }
    }

    /// The outbox during a refresh: a change made while the token is being
    /// renewed waits for the renewal inside the controller and goes out once,
    /// after it, with the new token and its own `Idempotency-Key`.
    @Test func aChangeMadeWhileARefreshRunsGoesOnceAfterItWithItsKey() async throws {
        let serverClock = ManualClock()
        let transport = ScriptedTransport(forwardingTo: AsyncHTTPClientTransport())
        try await withSenbei(serverClock: serverClock, transport: transport) { f in
            try await f.app.login()
            _ = try await f.app.loadTasks()
            let events = f.controller.events()
            // Given the token expired on the server, and a read that started its refresh, which the server holds
            try await f.control(route: "/oauth/token", latencyMs: 1000)
            serverClock.advance(by: .seconds(3601))
            let read = Task { try await f.app.loadActivities() }
            await serverClock.sleepers(atLeast: 1)

            // When a task is created while the refresh runs, and its send has started
            let change = try await f.app.createTask(name: "Call Ann")
            let key = try #require(try await f.app.outbox.entries().first?.idempotencyKey)
            for await event in events where event.operation == CreateTask.typeName && event.kind == .started { break }
            let drainer = ServerClockDrainer.start(serverClock)
            let created = try await f.app.sent(change)
            _ = try await read.value
            await ServerClockDrainer.stop(drainer, on: serverClock)

            // Then it was sent once, after the refresh was answered, with the new token and its key
            let exchanges = transport.exchanges
            // The refresh is the last token answered (the first is the sign-in's).
            let refreshed = try #require(exchanges.last { $0.status == 200 && $0.request.url.path == "/oauth/token" }?.answeredAt)
            let sends = exchanges.filter { $0.request.method == .post && $0.request.url.path == "/tasks" }
            #expect(sends.count == 1)
            let send = try #require(sends.first)
            #expect(send.sentAt > refreshed, "sent after the refresh: \(exchanges)")
            #expect(send.request.headers["Idempotency-Key"] == key)
            let token = try #require(await f.app.authenticator.currentCredential()?.accessToken)
            #expect(send.request.headers["Authorization"] == "Bearer \(token)")
            #expect(f.tokenGrants("refresh_token") == 1)
            #expect(created.name == "Call Ann" && created.id > 0)
            #expect(try await f.app.loadActivities().rows.filter { $0.subject == "task Call Ann" }.count == 1, "created once")
        }
    }

    /// A change whose send the server refuses for an expired token goes again
    /// after the refresh, with the same `Idempotency-Key`, and is done once.
    ///
    /// The outbox's delivery accepts every status (the outbox judges the
    /// answer), so its 401 arrives as a success: the authenticator renews the
    /// token for it all the same, and the send goes again with its key.
    @Test func aChangeRefusedForAnExpiredTokenGoesAgainAfterTheRefreshWithItsKey() async throws {
        let serverClock = ManualClock()
        let transport = ScriptedTransport(forwardingTo: AsyncHTTPClientTransport())
        try await withSenbei(serverClock: serverClock, transport: transport) { f in
            try await f.app.login()
            _ = try await f.app.loadTasks()
            let before = try #require(await f.app.authenticator.currentCredential()?.accessToken)
            // Given the token expired on the server (the client does not know)
            serverClock.advance(by: .seconds(3601))

            // When a task is created
            let change = try await f.app.createTask(name: "Call Bob")
            let key = try #require(try await f.app.outbox.entries().first?.idempotencyKey)
            do {
                let created = try await f.app.sent(change)

                // Then its first send was refused, the token renewed once, and the second send carried the same key
                let sends = transport.exchanges.filter { $0.request.method == .post && $0.request.url.path == "/tasks" }
                #expect(sends.map(\.status) == [401, 201], "\(sends)")
                if sends.count == 2 { #expect(sends[1].sentAt > sends[0].answeredAt ?? .max, "sent again after the refusal: \(sends)") }
                #expect(sends.map { $0.request.headers["Idempotency-Key"] } == [key, key])
                let after = try #require(await f.app.authenticator.currentCredential()?.accessToken)
                #expect(sends.first?.request.headers["Authorization"] == "Bearer \(before)" && sends.last?.request.headers["Authorization"] == "Bearer \(after)" && before != after)
                #expect(f.tokenGrants("refresh_token") == 1)
                #expect(created.name == "Call Bob")
                #expect(try await f.app.loadActivities().rows.filter { $0.subject == "task Call Bob" }.count == 1, "created once")
                #expect(!f.log.names.contains(.senbeiDidFailLogin))
            }
        }
    }

    /// The token lives in the authenticator's memory: after a sign-in, a
    /// refresh and a page, the cache file holds neither token.
    @Test func theTokensNeverReachTheCache() async throws {
        let serverClock = ManualClock()
        try await withSenbei(serverClock: serverClock) { f in
            try await f.app.login()
            let first = try #require(await f.app.authenticator.currentCredential())
            serverClock.advance(by: .seconds(3601))
            _ = try await f.app.loadPage(.contacts, refresh: true)
            let renewed = try #require(await f.app.authenticator.currentCredential())
            #expect(renewed.accessToken != first.accessToken)

            let path = try #require(f.store.path)
            var bytes = Data()
            for file in [path, path + "-wal"] { bytes += (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data() }
            #expect(!bytes.isEmpty)
            for secret in [first.accessToken, first.refreshToken, renewed.accessToken, renewed.refreshToken].compactMap({ $0 }) {
                #expect(bytes.range(of: Data(secret.utf8)) == nil, "a token is in the cache")
            }
        }
    }
}
