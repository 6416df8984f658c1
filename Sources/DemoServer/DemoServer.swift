import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

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
/// same seed and the same clock answer the same bytes. Every GET route also
/// answers HEAD (see ``HeadResponder``).
public final class DemoServer: Sendable {
    /// The configuration it was started with (with the bound port).
    public let configuration: Configuration
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    let state: ServerState

    /// The port the server is bound to.
    public var port: Int { configuration.port }

    /// `http://host:port`.
    public var baseURL: URL { URL(string: "http://\(configuration.host):\(configuration.port)")! }

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
        router.middlewares.add(RequestLogMiddleware(log: state.requestLog))
        router.middlewares.add(ConditionsMiddleware(state: state))
        ControlRoutes.add(to: router, state: state)
        NerdfeedRoutes.add(to: router, state: state)
        FaultRoutes.add(to: router, state: state)
        SenbeiRoutes.add(to: router, state: state)
        TimelineRoutes.add(to: router, state: state)
        PagingRoutes.add(to: router, state: state)

        let echoRouter = Router(context: DemoRequestContext.self)
        EchoRoutes.add(to: echoRouter, state: state)

        let quiet = Logger(label: "depot-server") { _ in SwiftLogNoOpLogHandler() }
        let (ports, portSignal) = AsyncStream<(Int, Int)>.makeStream()
        let app = Application(
            responder: HeadResponder(router.buildResponder()),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "depot-server"),
            onServerRunning: { channel in portSignal.yield((0, channel.localAddress?.port ?? 0)) },
            logger: quiet
        )
        // The second listener, on another port: another origin for redirect tests.
        let echo = Application(
            responder: HeadResponder(echoRouter.buildResponder()),
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

    /// Stops gracefully: requests in flight finish, then the listeners close.
    /// Requests waiting at a gate (``Fault/gated(_:)``, ``Fault/hang``) fail at once.
    public func stop() async {
        state.beginStopping()
        await group.triggerGracefulShutdown()
        _ = await task.result
    }

    /// Serves until the task is cancelled or the process gets SIGINT/SIGTERM.
    public func waitUntilStopped() async throws {
        try await task.value
    }
}
