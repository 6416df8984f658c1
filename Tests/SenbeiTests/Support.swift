import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import SenbeiKit
import Testing

/// One Senbei notification as observed: its name and the userInfo values Senbei documents.
struct Posted {
    var name: Notification.Name
    var payload: Any?
    var entity: Any?
    var error: DepotError?
    var operation: String?
}

/// Records every Senbei notification posted on a center. Senbei posts on the
/// main actor, synchronously, so the observer runs there too.
@MainActor
final class NotificationLog {
    private var entries: [Posted] = []
    let center = NotificationCenter()

    init() {
        for name in SenbeiNotification.allNames {
            _ = center.addObserver(forName: name, object: nil, queue: nil) { [weak self] note in
                let info = note.userInfo ?? [:]
                let name = note.name
                let error = info[SenbeiNotification.UserInfoKey.error] as? DepotError
                let operation = info[SenbeiNotification.UserInfoKey.operation] as? String
                // `nonisolated(unsafe)` is sound for these two `Any` values: SenbeiApp
                // posts on the main actor, and an observer added with `queue: nil`
                // runs synchronously on the posting thread, so they are read here
                // and used in `assumeIsolated` below on that one thread, before the
                // post returns; no other thread ever sees them. (`assumeIsolated`
                // traps if a post ever came from another thread.)
                nonisolated(unsafe) let payload = info[SenbeiNotification.UserInfoKey.payload]
                nonisolated(unsafe) let entity = info[SenbeiNotification.UserInfoKey.entity]
                MainActor.assumeIsolated {
                    self?.entries.append(Posted(name: name, payload: payload, entity: entity, error: error, operation: operation))
                }
            }
        }
    }

    /// Everything posted so far, in order.
    var all: [Posted] { entries }
    /// The names posted so far, in order.
    var names: [Notification.Name] { entries.map(\.name) }
    /// The last notification named `name`.
    func last(_ name: Notification.Name) -> Posted? { entries.last { $0.name == name } }
    /// Forgets what was posted.
    func clear() { entries.removeAll() }
}

/// Everything a Senbei test needs: a real server on 127.0.0.1 port 0, a real
/// SQLite file, a controller over AsyncHTTPClient, the app and its notifications.
@MainActor
struct Fixture {
    let server: DemoServer
    let store: Store
    let controller: NetworkController
    let app: SenbeiApp
    let credentials: SenbeiCredentials
    let log: NotificationLog
    let date: ManualDate

    /// Requests the server answered whose route contains `route` (`GET /contacts`).
    func served(_ route: String) -> Int {
        server.currentStats.requests.filter { $0.key.contains(route) }.values.reduce(0, +)
    }

    /// Sets the link's conditions for one route, or every route (`POST /_control`).
    func control(route: String?, latencyMs: Int) async throws {
        try await ServerControl.send(to: server, route: route, latencyMs: latencyMs)
    }

    /// How many `POST /oauth/token` requests of `grant` (`password`, `refresh_token`) the server saw.
    func tokenGrants(_ grant: String) -> Int {
        server.currentStats.tokenGrants[grant] ?? 0
    }

    /// Ends the session on the server's side, as a sign-out on another device
    /// would: the app's refresh token is used elsewhere (rotation makes its
    /// copy worthless), then the access token expires (`serverClock` moves on
    /// past `lifetime`). The app learns it at its next request.
    func endSessionOnServer(_ serverClock: ManualClock, lifetime: Duration = .seconds(3600)) async throws {
        let refreshToken = try #require(await app.authenticator.currentCredential()?.refreshToken)
        let answer = try await RawTokenGrant.send(to: server, ["grant_type": "refresh_token", "refresh_token": refreshToken, "client_id": "elsewhere"])
        try #require(answer.status == 200, "\(answer.text)")
        serverClock.advance(by: lifetime + .seconds(1))
    }

    /// Another client's changes: `contacts` new contacts ("Contact N") and
    /// `tasks` new tasks ("Task N"), each numbered in the CRM's change feed.
    func makeChanges(contacts: Int = 0, tasks: Int = 0) async throws {
        try await ServerControl.send(to: server, crmChanges: .init(contacts: contacts, tasks: tasks))
    }

    /// Makes the server close every connection without an answer (or answer again).
    func setOffline(_ offline: Bool) async throws {
        try await ServerControl.send(to: server, offline: offline)
    }

    /// The server handles the next `count` requests for `route` (a path, such
    /// as `/tasks`), effects and all, then closes their connection instead of
    /// answering: the "did my change go through?" case.
    func dropResponses(_ count: Int, on route: String) async throws {
        try await ServerControl.send(to: server, route: route, dropResponses: count)
    }

    /// Runs `body` with a second app on the same cache whose server cannot be
    /// reached (connection refused, at once), as a later launch without a
    /// network would be; shuts it down afterwards.
    func withOfflineApp(_ body: @MainActor (SenbeiApp) async throws -> Void) async throws {
        try await withApp(store: store, server: URL(string: "http://127.0.0.1:9")!, date: date, body)
    }
}

/// Runs `body` with an app on `store` that talks to `server` (signed out),
/// and shuts it down afterwards, whatever happens.
@MainActor
func withApp<T>(store: Store, server: URL, date: ManualDate, _ body: @MainActor (SenbeiApp) async throws -> T) async throws -> T {
    let credentials = SenbeiCredentials(username: "admin", password: "secret")
    var configuration = SenbeiApp.configuration(server: server, transport: AsyncHTTPClientTransport(), store: store, notificationCenter: nil)
    configuration.environment.date = date.provider
    let app = try SenbeiApp(controller: NetworkController(configuration: configuration), credentials: credentials, notificationCenter: NotificationCenter())
    do {
        let value = try await body(app)
        _ = await app.shutdown(grace: .zero)
        return value
    } catch {
        _ = await app.shutdown(grace: .zero)
        throw error
    }
}

/// Runs `body` with a fresh ``Fixture`` and tears everything down.
///
/// - Parameter serverClock: The server's clock, when the test holds requests on
///   it. After `body`, it is moved on whenever a request waits on it, until the
///   server has stopped: a graceful stop waits for every request in flight, and
///   a superseded search may still be sleeping on that clock.
@MainActor
func withSenbei(
    server configuration: DemoServer.Configuration = .init(seed: 7),
    serverClock: ManualClock? = nil,
    password: String = "secret",
    date: ManualDate = ManualDate(),
    transport: any Transport = AsyncHTTPClientTransport(),
    configure: (inout NetworkController.Configuration) -> Void = { _ in },
    _ body: @MainActor (Fixture) async throws -> Void
) async throws {
    var configuration = configuration
    if let serverClock { configuration.clock = serverClock }
    var drainer: Task<Void, Never>?
    defer { drainer?.cancel() }
    try await DemoServer.withRunning(configuration) { server in
        defer { drainer = serverClock.map { ServerClockDrainer.start($0) } }
        try await StoreFixtures.withStore(migrator: SenbeiSchema.migrator, environment: .init(date: date.provider)) { store in
            let log = NotificationLog()
            let credentials = SenbeiCredentials(username: "admin", password: password)
            var controllerConfiguration = SenbeiApp.configuration(server: server.baseURL, transport: transport, store: store, notificationCenter: nil)
            controllerConfiguration.environment.date = date.provider
            configure(&controllerConfiguration)
            let controller = NetworkController(configuration: controllerConfiguration)
            let app = try SenbeiApp(controller: controller, credentials: credentials, notificationCenter: log.center)
            let fixture = Fixture(server: server, store: store, controller: controller, app: app, credentials: credentials, log: log, date: date)
            do {
                try await body(fixture)
            } catch {
                _ = await app.shutdown(grace: .zero)
                throw error
            }
            _ = await app.shutdown(grace: .zero)
        }
    }
    if let serverClock, let running = drainer {
        await ServerClockDrainer.stop(running, on: serverClock)
    }
}

/// Moves a server's `ManualClock` on whenever something sleeps on it.
enum ServerClockDrainer {
    /// Moves `clock` by `step` each time: by default a second, past the tests'
    /// latencies (a longer one takes a few steps) without expiring the
    /// session's token, which lives an hour of server time.
    static func start(_ clock: ManualClock, step: Duration = .seconds(1)) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                await clock.sleepers(atLeast: 1)
                if Task.isCancelled { return }
                clock.advance(by: step)
            }
        }
    }

    /// Cancels the drainer and wakes it if it waits for a sleeper (with one of
    /// our own, cancelled afterwards), so it ends.
    static func stop(_ drainer: Task<Void, Never>, on clock: ManualClock) async {
        drainer.cancel()
        let release = Task { try? await clock.sleep(for: .seconds(1_000_000)) }
        await drainer.value
        release.cancel()
    }
}

/// `POST /_control` through a controller of its own (no credentials needed).
struct ServerControl: NetworkOperation {
    struct Body: Encodable, Sendable {
        struct CRMChanges: Encodable, Sendable {
            var contacts: Int
            var tasks: Int
        }

        var route: String?
        var latencyMs: Int?
        var offline: Bool?
        var dropResponses: Int?
        var crmChanges: CRMChanges?
    }

    let body: Body
    var request: NetworkRequest { .post("_control", json: body) }

    static func send(to server: DemoServer, route: String? = nil, latencyMs: Int? = nil, offline: Bool? = nil, dropResponses: Int? = nil, crmChanges: Body.CRMChanges? = nil) async throws {
        let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil)))
        _ = try await controller.perform(ServerControl(body: Body(route: route, latencyMs: latencyMs, offline: offline, dropResponses: dropResponses, crmChanges: crmChanges)))
        _ = await controller.shutdown(grace: .zero)
    }
}

/// A form-encoded `POST /oauth/token` through a controller of its own, any
/// answer accepted: what another device of the same user would send.
struct RawTokenGrant: NetworkOperation {
    typealias Output = NetworkResponse
    let url: URL
    let fields: [String: String]
    var request: NetworkRequest {
        let form = fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0.value)" }
        return NetworkRequest(method: .post, target: .url(url), body: .data(Data(form.joined(separator: "&").utf8), contentType: "application/x-www-form-urlencoded"))
    }
    var retryPolicy: RetryPolicy? { .never }
    func validate(_ response: NetworkResponse) throws {}

    static func send(to server: DemoServer, _ fields: [String: String]) async throws -> NetworkResponse {
        let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil)))
        let url = SenbeiApp.tokenEndpoint(for: server.baseURL).url
        do {
            let response = try await controller.perform(RawTokenGrant(url: url, fields: fields))
            _ = await controller.shutdown(grace: .zero)
            return response
        } catch {
            _ = await controller.shutdown(grace: .zero)
            throw error
        }
    }
}

/// Collects completions delivered on the main actor and lets a test wait for a number of them.
@MainActor
final class Outcomes<Value> {
    private(set) var results: [Result<Value, DepotError>] = []
    private var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    func record(_ result: Result<Value, DepotError>) {
        results.append(result)
        let ready = waiters.filter { $0.count <= results.count }
        waiters.removeAll { $0.count <= results.count }
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Returns once `count` results arrived.
    func wait(for count: Int) async {
        guard results.count < count else { return }
        await withCheckedContinuation { waiters.append((count, $0)) }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

extension SenbeiApp {
    /// Waits for `change`'s answer and returns the record the server accepted;
    /// throws the refusal, or if the change stayed queued. It returns at the
    /// decision: the long grace only bounds a test that would hang.
    func sent<Record>(_ change: QueuedChange<Record>) async throws(DepotError) -> Record {
        switch try await outcome(of: change, within: .seconds(60)) {
        case .sent(let record):
            return record
        case .queued(let entry):
            throw DepotError(.processing, detail: "\(entry) was not sent")
        }
    }
}
