import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// A real HTTP backend for Depot's example apps and tests, on Hummingbird.
///
/// Start it in-process and it tells you the port it bound:
///
/// ```swift
/// let server = try await DemoServer.start(.init(port: 0, seed: 7))
/// print(server.baseURL)          // http://127.0.0.1:54321
/// // ... fetch /forum/rss, /forum/atom, /topsongs/limit=10/json ...
/// await server.stop()
/// ```
///
/// Or scoped, so it always stops:
///
/// ```swift
/// try await DemoServer.withRunning(.init()) { server in ... }
/// ```
///
/// Data is generated from the seed and kept in memory, so two servers with the
/// same seed and the same clock answer the same bytes.
public final class DemoServer: Sendable {
    /// How a server is set up.
    public struct Configuration: Sendable {
        /// The address to bind. Only loopback addresses are expected.
        public var host: String
        /// The port; 0 picks a free one.
        public var port: Int
        /// The seed all generated data comes from.
        public var seed: UInt64
        /// How many forum posts exist at start.
        public var initialPosts: Int
        /// A new forum post appears every this much server time.
        public var postInterval: Duration
        /// The wall-clock date the server's time starts at (publication dates are relative to it).
        public var epoch: Date
        /// The server's clock. Inject a manual clock in tests to make posts appear on demand.
        public var clock: any Clock<Duration>
        /// The link's behaviour for every route; `POST /_control` changes it at runtime.
        public var conditions: NetworkConditions
        /// The approximate size of each `/avatars/N.png`.
        public var avatarBytes: Int

        /// Makes a configuration.
        public init(
            host: String = "127.0.0.1",
            port: Int = 0,
            seed: UInt64 = 1,
            initialPosts: Int = 20,
            postInterval: Duration = .seconds(60),
            epoch: Date = Date(timeIntervalSince1970: 1_767_225_600),
            clock: any Clock<Duration> = ContinuousClock(),
            conditions: NetworkConditions = .none,
            avatarBytes: Int = 20_000
        ) {
            self.host = host
            self.port = port
            self.seed = seed
            self.initialPosts = initialPosts
            self.postInterval = postInterval
            self.epoch = epoch
            self.clock = clock
            self.conditions = conditions
            self.avatarBytes = avatarBytes
        }
    }

    /// What the server has served, per route.
    public struct Stats: Codable, Sendable, Hashable {
        /// Requests per route pattern, for example `GET /forum/rss`.
        public var requests: [String: Int] = [:]
        /// Body bytes sent in all.
        public var bytesSent: Int = 0
        /// Responses that were 304 Not Modified.
        public var notModified: Int = 0
    }

    /// The configuration it was started with (with the bound port).
    public let configuration: Configuration
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    private let state: ServerState

    /// The port the server is bound to.
    public var port: Int { configuration.port }

    /// `http://host:port`.
    public var baseURL: URL { URL(string: "http://\(configuration.host):\(configuration.port)")! }

    /// A copy of the counters.
    public var currentStats: Stats { state.stats.withLock { $0 } }

    private init(configuration: Configuration, group: ServiceGroup, task: Task<Void, any Error>, state: ServerState) {
        self.configuration = configuration
        self.group = group
        self.task = task
        self.state = state
    }

    /// Starts a server and returns once it listens.
    public static func start(_ configuration: Configuration = Configuration()) async throws -> DemoServer {
        let state = ServerState(configuration: configuration)
        let router = Router(context: DemoRequestContext.self)
        router.middlewares.add(StatsMiddleware(state: state))
        router.middlewares.add(ConditionsMiddleware(state: state))
        ControlRoutes.add(to: router, state: state)
        NerdfeedRoutes.add(to: router, state: state)
        FaultRoutes.add(to: router, state: state)
        SenbeiRoutes.add(to: router, state: state)
        TimelineRoutes.add(to: router, state: state)
        router.get("/_stats") { _, _ in
            let data = try JSONEncoder().encode(state.stats.withLock { $0 })
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }

        let echoRouter = Router(context: DemoRequestContext.self)
        EchoRoutes.add(to: echoRouter, state: state)

        let quiet = Logger(label: "depot-server") { _ in SwiftLogNoOpLogHandler() }
        let (ports, portSignal) = AsyncStream<(Int, Int)>.makeStream()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "depot-server"),
            onServerRunning: { channel in portSignal.yield((0, channel.localAddress?.port ?? 0)) },
            logger: quiet
        )
        // The second listener, on another port: another origin for redirect tests.
        let echo = Application(
            router: echoRouter,
            configuration: .init(address: .hostname(configuration.host, port: 0), serverName: "depot-server-echo"),
            onServerRunning: { channel in portSignal.yield((1, channel.localAddress?.port ?? 0)) },
            logger: quiet
        )
        let group = ServiceGroup(services: [app, echo], gracefulShutdownSignals: [], cancellationSignals: [], logger: quiet)
        let task = Task { try await group.run() }
        // If a listener cannot bind, the group ends: stop waiting for ports then.
        Task { _ = await task.result; portSignal.finish() }
        var listening: [Int: Int] = [:]
        for await (listener, port) in ports {
            listening[listener] = port
            if listening.count == 2 { break }
        }
        guard let port = listening[0], port > 0, let echoPort = listening[1], echoPort > 0 else {
            task.cancel()
            _ = await task.result
            throw DemoServerError(message: "could not bind \(configuration.host):\(configuration.port)")
        }
        state.boundPort.withLock { $0 = port }
        state.crossOriginPort.withLock { $0 = echoPort }
        var bound = configuration
        bound.port = port
        return DemoServer(configuration: bound, group: group, task: task, state: state)
    }

    /// Runs `body` with a started server and stops the server afterwards.
    public static func withRunning<T>(
        _ configuration: Configuration = Configuration(),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (DemoServer) async throws -> T
    ) async throws -> T {
        let server = try await start(configuration)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// The conditions that apply to requests for `path` now.
    public func currentConditions(for path: String) -> NetworkConditions { state.conditions(for: path) }

    /// The headers the second listener received last (after ``Fault/redirectCrossOrigin``).
    public var crossOriginHeaders: [String: String]? { state.crossOriginHeaders.withLock { $0 } }

    /// Stops gracefully: requests in flight finish, then the listeners close.
    public func stop() async {
        state.stopping.withLock { $0 = true }
        await group.triggerGracefulShutdown()
        _ = await task.result
    }

    /// Serves until the task is cancelled or the process gets SIGINT/SIGTERM.
    public func waitUntilStopped() async throws {
        try await task.value
    }
}

/// Why the demo server could not do what was asked.
public struct DemoServerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    public var description: String { "depot-server: \(message)" }
}

/// State shared by the route handlers.
final class ServerState: Sendable {
    let configuration: DemoServer.Configuration
    let feed: ForumFeed
    let stats = Mutex(DemoServer.Stats())
    let boundPort = Mutex(0)
    let crossOriginPort = Mutex(0)
    let crossOriginHeaders = Mutex<[String: String]?>(nil)
    let stopping = Mutex(false)
    private let link: Mutex<(global: NetworkConditions, routes: [String: NetworkConditions], random: SplitMix64)>
    /// Responses still to drop after handling, by route path ("" for any path).
    private let drops = Mutex<[String: Int]>([:])
    /// Server time until which the shaped link is busy sending booked chunks.
    private let linkBusyUntil = Mutex(Duration.zero)
    private let elapsedNow: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    init(configuration: DemoServer.Configuration) {
        self.configuration = configuration
        self.feed = ForumFeed(seed: configuration.seed, initialPosts: configuration.initialPosts, postInterval: configuration.postInterval, epoch: configuration.epoch)
        (self.elapsedNow, self.sleeper) = Self.timeline(on: configuration.clock)
        self.link = Mutex((configuration.conditions, [:], SplitMix64(seed: configuration.seed)))
    }

    /// The conditions for a request path: the route's, over the global ones.
    func conditions(for path: String) -> NetworkConditions {
        link.withLock { $0.global.overridden(by: $0.routes[path]) }
    }

    /// Applies a `POST /_control` request.
    func control(_ request: ControlRequest) {
        link.withLock { link in
            if request.reset == true {
                link.global = configuration.conditions
                link.routes = [:]
            }
            if let route = request.route {
                link.routes[route] = (link.routes[route] ?? .none).overridden(by: request.conditions)
            } else {
                link.global = link.global.overridden(by: request.conditions)
            }
        }
        drops.withLock { drops in
            if request.reset == true { drops = [:] }
            if let count = request.dropResponses { drops[request.route ?? ""] = count }
        }
    }

    /// Books `transmission` on the shared link and returns how long to wait, from
    /// now, until that much has gone out: after everything booked before it.
    func reserveLink(for transmission: Duration) -> Duration {
        let now = elapsed
        return linkBusyUntil.withLock { busyUntil in
            busyUntil = max(busyUntil, now) + transmission
            return busyUntil - now
        }
    }

    /// Whether the response to this request must be dropped; counts it if so.
    func takeDroppedResponse(for path: String) -> Bool {
        drops.withLock { drops in
            for key in [path, ""] {
                if let left = drops[key], left > 0 {
                    drops[key] = left - 1
                    return true
                }
            }
            return false
        }
    }

    /// The next number in 0..<1 from the seeded generator (for the fail rate).
    func nextUnit() -> Double {
        link.withLock { Double($0.random.next() >> 11) / Double(1 << 53) }
    }

    private static func timeline<C: Clock>(on clock: C) -> (@Sendable () -> Duration, @Sendable (Duration) async throws -> Void) where C.Duration == Duration {
        let origin = clock.now
        return ({ origin.duration(to: clock.now) }, { try await clock.sleep(for: $0) })
    }

    /// Sleeps on the server's clock (pacing of drip bodies and delays).
    func sleep(for duration: Duration) async throws { try await sleeper(duration) }

    var isStopping: Bool { stopping.withLock { $0 } }

    /// Server time since start.
    var elapsed: Duration { elapsedNow() }

    /// The wall-clock date of server time now.
    var now: Date {
        configuration.epoch.addingTimeInterval(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}

/// Counts requests per route and bytes sent.
private struct StatsMiddleware: RouterMiddleware {
    typealias Context = DemoRequestContext
    let state: ServerState

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        let route = "\(request.method.rawValue) \(context.endpointPath ?? request.uri.path)"
        let bytes = response.body.contentLength ?? 0
        state.stats.withLock { stats in
            stats.requests[route, default: 0] += 1
            stats.bytesSent += bytes
            if response.status == .notModified { stats.notModified += 1 }
        }
        return response
    }
}
