import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import NIOCore
import Synchronization

/// A real HTTP server on 127.0.0.1, port 0, started inside a test.
///
/// Routes are typed (``Route``), never raw strings at call sites. The server
/// records what it saw so tests can assert on the server side: request counts
/// per path, headers received, and transfers the client abandoned.
final class TestServer: Sendable {
    /// The routes the test server serves.
    enum Route {
        /// `{"message":"hello"}`
        case hello
        /// A JSON object of the request's headers (names lower-cased).
        case echoHeaders
        /// The request's method, content type and body, as JSON.
        case echoBody
        /// The given status, with `body` as text.
        case status(Int, body: String)
        /// `count` redirects (302) and then `hello`.
        case redirect(count: Int)
        /// A redirect to itself, forever.
        case redirectLoop
        /// A redirect to `url` with the given status.
        case redirectTo(URL, status: Int)
        /// An endless chunked body, 16 KB a chunk.
        case endless
        /// Sends the head and one chunk, then waits for the gate named `gate`, then the rest.
        case stalledBody(gate: String)
        /// Waits for the gate before answering `hello`.
        case gated(String)
        /// Never answers (until the server stops).
        case hang
        /// `n` bytes of JSON-ish filler.
        case bytes(Int)

        var path: String {
            switch self {
            case .hello: return "/hello"
            case .echoHeaders: return "/echo/headers"
            case .echoBody: return "/echo/body"
            case .status(let code, let body): return "/status/\(code)?body=\(body.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
            case .redirect(let count): return "/redirect/\(count)"
            case .redirectLoop: return "/redirect-loop"
            case .redirectTo(let url, let status): return "/redirect-to?status=\(status)&url=\(url.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
            case .endless: return "/endless"
            case .stalledBody(let gate): return "/stalled/\(gate)"
            case .gated(let gate): return "/gated/\(gate)"
            case .hang: return "/hang"
            case .bytes(let n): return "/bytes/\(n)"
            }
        }
    }

    struct Recorded: Sendable {
        var counts: [String: Int] = [:]
        var headers: [String: [String: String]] = [:]
        var aborted: [String] = []
    }

    let port: Int
    let gates: Gates
    private let recorded: ServerBox<Recorded>
    private let stopping: ServerBox<Bool>
    private let group: ServiceGroup
    private let task: Task<Void, any Error>
    private let abortSignal: AsyncStream<String>.Continuation
    let aborts: AsyncStream<String>

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    func url(_ route: Route) -> URL { URL(string: "http://127.0.0.1:\(port)\(route.path)")! }

    /// Requests received for `path` (without query).
    func count(_ path: String) -> Int { recorded.value.counts[path] ?? 0 }

    /// The headers of the last request to `path`.
    func headers(for path: String) -> [String: String]? { recorded.value.headers[path] }

    private init(port: Int, gates: Gates, recorded: ServerBox<Recorded>, stopping: ServerBox<Bool>, group: ServiceGroup, task: Task<Void, any Error>, aborts: AsyncStream<String>, abortSignal: AsyncStream<String>.Continuation) {
        self.port = port
        self.gates = gates
        self.recorded = recorded
        self.stopping = stopping
        self.group = group
        self.task = task
        self.aborts = aborts
        self.abortSignal = abortSignal
    }

    static func start() async throws -> TestServer {
        let recorded = ServerBox(Recorded())
        let gates = Gates()
        let (aborts, abortSignal) = AsyncStream<String>.makeStream()
        let router = Router()
        router.middlewares.add(RecordingMiddleware(recorded: recorded))
        let stopping = ServerBox(false)
        Self.addRoutes(to: router, gates: gates, stopping: stopping, abortSignal: abortSignal)
        let (ports, portSignal) = AsyncStream<Int>.makeStream()
        let quiet = Logger(label: "test-server", factory: { _ in SwiftLogNoOpLogHandler() })
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "depot-test"),
            onServerRunning: { channel in
                portSignal.yield(channel.localAddress?.port ?? 0)
                portSignal.finish()
            },
            logger: quiet
        )
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], cancellationSignals: [], logger: quiet)
        let task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            task.cancel()
            throw CocoaError(.fileNoSuchFile)
        }
        return TestServer(port: port, gates: gates, recorded: recorded, stopping: stopping, group: group, task: task, aborts: aborts, abortSignal: abortSignal)
    }

    /// Stops gracefully: open handlers end, then the listener closes.
    func stop() async {
        stopping.withLock { $0 = true }
        gates.cancelAll()
        await group.triggerGracefulShutdown()
        _ = await task.result
        abortSignal.finish()
    }

    private static func addRoutes(to router: Router<BasicRequestContext>, gates: Gates, stopping: ServerBox<Bool>, abortSignal: AsyncStream<String>.Continuation) {
        router.get("/hello") { _, _ in
            Self.json(#"{"message":"hello"}"#)
        }
        router.get("/echo/headers") { request, _ in
            var object: [String: String] = [:]
            for field in request.headers { object[field.name.canonicalName] = field.value }
            let data = try JSONEncoder().encode(object)
            return Self.json(String(decoding: data, as: UTF8.self))
        }
        router.on("/echo/body", method: .post) { request, _ in try await Self.echoBody(request) }
        router.on("/echo/body", method: .put) { request, _ in try await Self.echoBody(request) }
        router.get("/status/:code") { request, context in
            let code = try context.parameters.require("code", as: Int.self)
            // 1xx, 204 and 304 must not carry a body.
            let body = [204, 304].contains(code) ? "" : request.uri.queryParameters.get("body") ?? ""
            return Response(status: .init(code: code), headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.get("/redirect/:count") { _, context in
            let count = try context.parameters.require("count", as: Int.self)
            let next = count <= 1 ? "/hello" : "/redirect/\(count - 1)"
            return Response(status: .found, headers: [.location: next])
        }
        router.get("/redirect-loop") { _, _ in
            Response(status: .found, headers: [.location: "/redirect-loop"])
        }
        router.get("/redirect-to") { request, _ in
            let status = request.uri.queryParameters.get("status", as: Int.self) ?? 302
            let url = request.uri.queryParameters.get("url") ?? "/hello"
            return Response(status: .init(code: status), headers: [.location: url])
        }
        router.get("/endless") { _, _ in
            let chunk = ByteBuffer(repeating: UInt8(ascii: "x"), count: 16 * 1024)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init { writer in
                // Paced at 16 KB per millisecond (16 MB/s): Hummingbird's writer buffers
                // without waiting for the socket, so an unpaced loop would copy hundreds of
                // megabytes before it noticed that the client had gone.
                let clock = ContinuousClock()
                do {
                    while !stopping.value {
                        try await writer.write(chunk)
                        try await clock.sleep(for: .milliseconds(1))
                    }
                } catch {
                    // The client went away: record it and end the body without throwing.
                    abortSignal.yield("/endless")
                }
                try? await writer.finish(nil)
            })
        }
        router.get("/stalled/:gate") { _, context in
            let gate = try context.parameters.require("gate")
            return Response(status: .ok, headers: [.contentType: "application/octet-stream", .contentLength: "\(64 * 1024)"], body: .init { writer in
                do {
                    try await writer.write(ByteBuffer(repeating: UInt8(ascii: "a"), count: 16 * 1024))
                    try await gates.wait(gate)
                    for _ in 0..<3 { try await writer.write(ByteBuffer(repeating: UInt8(ascii: "b"), count: 16 * 1024)) }
                } catch {
                    abortSignal.yield("/stalled/\(gate)")
                }
                try? await writer.finish(nil)
            })
        }
        router.get("/gated/:gate") { _, context in
            try await gates.wait(try context.parameters.require("gate"))
            return Self.json(#"{"message":"hello"}"#)
        }
        router.on("/gated/:gate", method: .post) { request, context in
            try await gates.wait(try context.parameters.require("gate"))
            return try await Self.echoBody(request)
        }
        router.get("/hang") { _, _ in
            try await gates.wait("never")
            return Response(status: .ok)
        }
        router.get("/bytes/:n") { _, context in
            let n = try context.parameters.require("n", as: Int.self)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "z"), count: n)))
        }
    }

    private static func echoBody(_ request: Request) async throws -> Response {
        let body = try await request.body.collect(upTo: 1 << 20)
        let object: [String: String] = [
            "method": request.method.rawValue,
            "contentType": request.headers[.contentType] ?? "",
            "body": String(buffer: body),
        ]
        return json(String(decoding: try JSONEncoder().encode(object), as: UTF8.self))
    }

    private static func json(_ text: String) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// Counts requests per path and keeps the last headers seen on each.
private struct RecordingMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext
    let recorded: ServerBox<TestServer.Recorded>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        let path = request.uri.path
        recorded.withLock {
            $0.counts[path, default: 0] += 1
            $0.headers[path] = headers
        }
        return try await next(request, context)
    }
}

/// Named gates a handler can wait on until the test opens them.
final class Gates: Sendable {
    private struct State {
        var open: Set<String> = []
        var waiting: [String: [UInt64: CheckedContinuation<Void, any Error>]] = [:]
        var arrived: [String: Int] = [:]
        var next: UInt64 = 0
        var cancelled = false
    }

    private let state = ServerBox(State())

    /// Waits until `name` is opened; throws if the server stops first.
    func wait(_ name: String) async throws {
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            state.arrived[name, default: 0] += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let verdict: Bool? = state.withLock { state in
                    if state.cancelled || Task.isCancelled { return false }
                    if state.open.contains(name) { return true }
                    state.waiting[name, default: [:]][id] = continuation
                    return nil
                }
                switch verdict {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let continuation = state.withLock { $0.waiting[name]?.removeValue(forKey: id) }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// How many requests have reached gate `name`.
    func arrivals(_ name: String) -> Int { state.value.arrived[name] ?? 0 }

    /// Opens `name`: every waiter and every later arrival passes.
    func open(_ name: String) {
        let waiters = state.withLock { state in
            state.open.insert(name)
            return state.waiting.removeValue(forKey: name).map { Array($0.values) } ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    func cancelAll() {
        let waiters = state.withLock { state in
            state.cancelled = true
            defer { state.waiting.removeAll() }
            return state.waiting.values.flatMap(\.values)
        }
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
    }
}

/// A `Mutex` in a class, for sharing between route handlers.
final class ServerBox<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R { try mutex.withLock { try body(&$0) } }
    var value: Value { mutex.withLock { $0 } }
}
