import Depot
import Foundation
import Synchronization

/// A ``/Depot/Transport`` that models a network link on an injected clock, so tests can
/// see how code behaves on a slow, shared, flaky or absent network, instantly
/// and the same way every time.
///
/// The model:
/// - the response head arrives one round trip plus the route's server latency
///   after `send`;
/// - body bytes then flow at a fair share of the link's bandwidth (processor
///   sharing: n transfers in their body phase each get 1/n), in chunks of
///   ``chunkSize`` bytes, whether or not the consumer is reading yet (an
///   unbounded receive buffer); or, when the link has a ``Link/queue``,
///   through a FIFO at the bottleneck, so bytes already queued delay every
///   response behind them, as a router's buffer or `tbf` does;
/// - a scripted timeline changes bandwidth and round trip, and takes the link
///   offline: then `send` fails with ``/Depot/DepotError/Code/offline`` and transfers
///   in flight fail with ``/Depot/DepotError/Code/connectionLost``;
/// - routes (matched by path) give status, size, latency and headers, and can
///   fail a number of times first (for example 503 with `Retry-After`); a
///   200 route with an `ETag` header answers a GET or HEAD whose
///   `If-None-Match` names it with 304 Not Modified and no body, as a server does;
///   with a strong `ETag` it also answers `Range: bytes=a-b` (and a matching
///   `If-Range`) with 206 and those bytes;
/// - a streamed route (``Route/init(path:latency:stream:)``) plays a
///   ``StreamScript`` per connection: chunks at scripted times, then a close,
///   a drop or nothing;
/// - cancelling the calling task, or dropping the body, ends the transfer and
///   frees its share at once.
///
/// On a ``ManualClock`` time moves only through ``run(until:quietYields:settled:)``, which
/// waits until everything is parked and then jumps to the next event: a minute
/// of simulated traffic runs in milliseconds and gives the same result every
/// run. On any other clock the simulator times itself (a link in real time).
///
/// For example:
///
/// ```swift
/// let clock = ManualClock()
/// let simulator = NetworkSimulator(
///     clock: clock,
///     link: .init(bandwidth: 20_000_000, rtt: .milliseconds(40)),
///     routes: [.init(path: "/feed", bytes: 40_000), .init(path: "/avatar/*", bytes: 8_000)],
///     timeline: [.bandwidth(100_000, at: .seconds(5)), .bandwidth(20_000_000, at: .seconds(30))]
/// )
/// ```
public final class NetworkSimulator: Transport, Sendable {
    /// A link's capacity and delay.
    public struct Link: Sendable, Hashable {
        /// Bandwidth in bits per second, shared by every transfer in its body phase.
        public var bandwidth: Double
        /// The round-trip time: from `send` to the response head, before server latency.
        public var rtt: Duration
        /// The bytes the narrowest hop can queue (a router's buffer, a `tbf`
        /// qdisc's limit), or `nil` for no queue: then every transfer in its
        /// body phase gets an equal share at once (processor sharing). With a
        /// queue, servers put bytes into it as fast as it has room (senders
        /// with more share the room equally) and the link drains it in order:
        /// a response, its head included, waits behind every byte queued
        /// before it, as on a real shaped link. Read when the simulator is made.
        public var queue: Int?

        /// Makes a link.
        ///
        /// For example, 1 Mbit/s with a 94 KB queue, as `tc qdisc ... tbf rate 1mbit burst 32kb latency 500ms` gives:
        /// `.init(bandwidth: 1_000_000, rtt: .milliseconds(1), queue: 94_000)`.
        ///
        /// - Parameters:
        ///   - bandwidth: Bits per second.
        ///   - rtt: The round-trip time.
        ///   - queue: The bottleneck's queue in bytes; `nil` (the default) for fair sharing with no queue.
        public init(bandwidth: Double, rtt: Duration, queue: Int? = nil) {
            self.bandwidth = max(0, bandwidth)
            self.rtt = max(.zero, rtt)
            self.queue = queue.map { max(0, $0) }
        }
    }

    /// What the server answers for a path.
    public struct Route: Sendable {
        /// The path to match exactly, or a prefix followed by `*` (`"/avatars/*"`).
        public var path: String
        /// The status.
        public var status: Int
        /// The body size in bytes (the size of ``body`` when that is given).
        public var bytes: Int
        /// The server's time before answering, added to the round trip.
        public var latency: Duration
        /// The headers; `Content-Length` is added when missing.
        public var headers: HeaderFields
        /// The body content; zeros when `nil`.
        public var body: Data?
        /// Failures served, in order, before the normal answer.
        public var failures: [Failure]
        /// For a streamed route: the script of each connection, made from its request.
        var stream: (@Sendable (TransportRequest) -> StreamScript)?

        /// Makes a route with a body of `bytes` zero bytes.
        ///
        /// - Parameters:
        ///   - path: An exact path, or a prefix followed by `*`.
        ///   - status: The status (200).
        ///   - bytes: The body size.
        ///   - latency: Server time before the head (0).
        ///   - headers: Response headers.
        public init(path: String, status: Int = 200, bytes: Int, latency: Duration = .zero, headers: HeaderFields = [:]) {
            self.path = path
            self.status = status
            self.bytes = max(0, bytes)
            self.latency = latency
            self.headers = headers
            self.body = nil
            self.failures = []
            self.stream = nil
        }

        /// Makes a route that answers with `body`.
        ///
        /// - Parameters:
        ///   - path: An exact path, or a prefix followed by `*`.
        ///   - status: The status (200).
        ///   - body: The body.
        ///   - latency: Server time before the head (0).
        ///   - headers: Response headers.
        public init(path: String, status: Int = 200, body: Data, latency: Duration = .zero, headers: HeaderFields = [:]) {
            self.init(path: path, status: status, bytes: body.count, latency: latency, headers: headers)
            self.body = body
        }

        /// The same route, failing the first `times` requests with `failure`.
        ///
        /// For example: `.init(path: "/feed", bytes: 40_000).failing(2, with: .status(503, headers: ["Retry-After": "1"]))`.
        ///
        /// - Parameters:
        ///   - times: How many requests fail.
        ///   - failure: How they fail.
        public func failing(_ times: Int, with failure: Failure) -> Route {
            var copy = self
            copy.failures += Array(repeating: failure, count: max(0, times))
            return copy
        }

        func matches(_ requestPath: String) -> Bool {
            if path.hasSuffix("*") { return requestPath.hasPrefix(path.dropLast()) }
            return requestPath == path
        }
    }

    /// A scripted way for a request to fail.
    public struct Failure: Sendable, Hashable {
        enum Kind: Sendable, Hashable {
            case status(Int, HeaderFields, bytes: Int)
            case connectionLost(afterBytes: Int)
            case refused
        }

        let kind: Kind

        /// The server answers `status` (with these headers and a body of `bytes` bytes).
        public static func status(_ status: Int, headers: HeaderFields = [:], bytes: Int = 0) -> Failure {
            Failure(kind: .status(status, headers, bytes: max(0, bytes)))
        }

        /// The connection breaks after `bytes` body bytes (``/Depot/DepotError/Code/connectionLost``).
        public static func connectionLost(afterBytes bytes: Int) -> Failure {
            Failure(kind: .connectionLost(afterBytes: max(0, bytes)))
        }

        /// The connection is refused at once (``/Depot/DepotError/Code/offline``).
        public static let refused = Failure(kind: .refused)
    }

    /// A scripted change of the link at a point in simulated time.
    public struct Change: Sendable, Hashable {
        enum Kind: Sendable, Hashable {
            case bandwidth(Double)
            case rtt(Duration)
            case offline
            case online
        }

        /// When the change happens, as time since the simulator was made.
        public var at: Duration
        let kind: Kind

        /// The bandwidth becomes `bitsPerSecond` at `time`.
        public static func bandwidth(_ bitsPerSecond: Double, at time: Duration) -> Change {
            Change(at: time, kind: .bandwidth(max(0, bitsPerSecond)))
        }

        /// The round trip becomes `rtt` at `time` (for requests sent from then on).
        public static func rtt(_ rtt: Duration, at time: Duration) -> Change {
            Change(at: time, kind: .rtt(max(.zero, rtt)))
        }

        /// The link goes offline at `time`.
        public static func offline(at time: Duration) -> Change { Change(at: time, kind: .offline) }

        /// The link comes back at `time`.
        public static func online(at time: Duration) -> Change { Change(at: time, kind: .online) }

        /// Offline from `start` until `end`.
        public static func offline(from start: Duration, until end: Duration) -> [Change] {
            [.offline(at: start), .online(at: end)]
        }
    }

    /// What happened to one transfer, on the simulator's time line.
    public struct Record: Sendable, Hashable, CustomStringConvertible {
        /// How a transfer ended. Frozen on purpose: the ways a transfer ends.
        public enum Outcome: Sendable, Hashable {
            /// The consumer read the whole body.
            case completed
            /// It failed with this code (`.offline`, `.connectionLost`).
            case failed(DepotError.Code)
            /// The consumer cancelled or dropped it.
            case cancelled
        }

        /// The transfer's number, in the order `send` was called.
        public var id: Int
        /// The method.
        public var method: NetworkRequest.Method
        /// The URL's path.
        public var path: String
        /// The status answered, once the head arrived.
        public var status: Int?
        /// When `send` was called.
        public var started: Duration
        /// When the head arrived.
        public var firstByte: Duration?
        /// When the last body byte arrived.
        public var lastByte: Duration?
        /// When it ended (read to the end, failed or cancelled).
        public var ended: Duration?
        /// Body bytes handed to the consumer.
        public var bytes: Int
        /// How it ended; `nil` while open.
        public var outcome: Outcome?

        public var description: String {
            func s(_ d: Duration?) -> String { d.map { String(format: "%.6f", Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18) } ?? "-" }
            return "#\(id) \(method) \(path) \(status.map(String.init) ?? "-") start \(s(started)) head \(s(firstByte)) last \(s(lastByte)) end \(s(ended)) \(bytes) B \(outcome.map { "\($0)" } ?? "open")"
        }
    }

    let model: Mutex<LinkModel>
    let now: @Sendable () -> Duration
    let sleepUntil: @Sendable (Duration) async throws -> Void
    let manualClock: ManualClock?
    /// The size of the chunks bodies are delivered in.
    public let chunkSize: Int
    let timer = Mutex<(deadline: Duration, task: Task<Void, Never>)?>(nil)

    /// Makes a simulator.
    ///
    /// - Parameters:
    ///   - clock: The clock the link runs on; a ``ManualClock`` is driven by ``run(until:quietYields:settled:)``.
    ///   - link: The link at the start.
    ///   - routes: What the server answers; the first match wins. Other paths get a 404 with no body.
    ///   - timeline: Scripted changes of the link.
    ///   - chunkSize: The body chunk size (16 KB).
    public init(clock: some Clock<Duration>, link: Link, routes: [Route], timeline: [Change] = [], chunkSize: Int = 16 * 1024) {
        let origin = clock.now
        now = { origin.duration(to: clock.now) }
        sleepUntil = { offset in
            let deadline = origin.advanced(by: offset)
            guard clock.now < deadline else { return try Task.checkCancellation() }
            try await clock.sleep(until: deadline, tolerance: nil)
        }
        manualClock = clock as? ManualClock
        self.chunkSize = max(1, chunkSize)
        model = Mutex(LinkModel(link: link, routes: routes, timeline: timeline, chunkSize: max(1, chunkSize)))
    }

    /// Every transfer so far, in the order `send` was called.
    public var records: [Record] { model.withLock { $0.records } }

    /// How many transfers are open: sent, and not yet read to the end, failed or dropped.
    public var openTransferCount: Int { model.withLock { $0.transfers.count } }

    /// The link as it is now.
    public var link: Link { model.withLock { $0.link } }

    /// Whether the link is offline now.
    public var isOffline: Bool { model.withLock { !$0.online } }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        try Task.checkCancellation()
        let path = request.url.path.isEmpty ? "/" : request.url.path
        let (opened, effects) = model.withLock { model in
            model.advance(to: now())
            let opened = model.open(method: request.method, path: path, ifNoneMatch: request.headers["If-None-Match"], range: request.headers["Range"], ifRange: request.headers["If-Range"], request: request)
            return (opened, model.takeEffects())
        }
        run(effects)
        let id: Int
        switch opened {
        case .failure(let error): throw error
        case .success(let opened): id = opened
        }
        try await wait(for: id) { model, continuation in
            model.awaitHead(id, continuation)
        }
        let (status, headers) = model.withLock { model in model.head(of: id) }
        let token = BodyToken(simulator: self, id: id)
        let body = TransportBody(unfolding: { try await token.next() })
        return TransportResponse(status: status, headers: headers, body: body)
    }

    /// Waits on the model for transfer `id`, ending it as cancelled if the task is cancelled.
    func wait<T: Sendable>(for id: Int, _ park: @escaping (inout LinkModel, CheckedContinuation<T, any Error>) -> Result<T, any Error>?) async throws -> T {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let (immediate, effects) = model.withLock { model -> (Result<T, any Error>?, [LinkModel.Effect]) in
                    if Task.isCancelled {
                        model.advance(to: now())
                        model.close(id, outcome: .cancelled)
                        return (.failure(DepotError(.cancelled)), model.takeEffects())
                    }
                    return (park(&model, continuation), model.takeEffects())
                }
                run(effects)
                if let immediate { continuation.resume(with: immediate) }
                rearm()
            }
        } onCancel: {
            self.abandon(id)
        }
    }

    func nextChunk(_ id: Int) async throws -> Data? {
        try await wait(for: id) { model, continuation in
            model.awaitChunk(id, continuation)
        }
    }

    /// Ends transfer `id` as cancelled (a no-op once it has ended).
    func abandon(_ id: Int) {
        let effects = model.withLock { model in
            model.advance(to: now())
            model.close(id, outcome: .cancelled)
            return model.takeEffects()
        }
        run(effects)
        rearm()
    }

    func run(_ effects: [LinkModel.Effect]) {
        for effect in effects {
            switch effect {
            case .resumeHead(let continuation, let result): continuation.resume(with: result)
            case .resumeChunk(let continuation, let result): continuation.resume(with: result)
            }
        }
    }

    /// Off a ``ManualClock``, keeps one task sleeping until the model's next event.
    func rearm() {
        guard manualClock == nil else { return }
        let next = model.withLock { $0.nextEventTime() }
        let replaced = timer.withLock { timer -> Task<Void, Never>? in
            if timer?.deadline == next { return nil }
            let old = timer?.task
            if let next {
                let sleepUntil = self.sleepUntil
                timer = (next, Task { [weak self] in
                    do { try await sleepUntil(next) } catch { return }
                    self?.tick()
                })
            } else {
                timer = nil
            }
            return old
        }
        replaced?.cancel()
    }

    private func tick() {
        timer.withLock { $0 = nil }
        let effects = model.withLock { model in
            model.advance(to: now())
            return model.takeEffects()
        }
        run(effects)
        rearm()
    }
}

/// Lives as long as a response body: when the body is dropped early, the transfer ends.
final class BodyToken: Sendable {
    let simulator: NetworkSimulator
    let id: Int

    init(simulator: NetworkSimulator, id: Int) {
        self.simulator = simulator
        self.id = id
    }

    func next() async throws -> Data? {
        try await simulator.nextChunk(id)
    }

    deinit { simulator.abandon(id) }
}
