import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// How the server's link behaves: set globally at start, and per route at
/// runtime through `POST /_control`.
///
/// ```sh
/// curl -X POST localhost:8080/_control -d '{"latencyMs": 300, "bandwidthKbps": 400}'
/// curl -X POST localhost:8080/_control -d '{"route": "/forum/rss", "failRate": 1}'
/// curl -X POST localhost:8080/_control -d '{"offline": true}'
/// curl -X POST localhost:8080/_control -d '{"route": "/posts", "dropResponses": 1}'
/// curl -X POST localhost:8080/_control -d '{"reset": true}'
/// ```
public struct NetworkConditions: Codable, Sendable, Hashable {
    /// Delay before the response head, in milliseconds of server time.
    public var latencyMs: Int?
    /// The body is streamed in paced chunks at this rate (kilobits per second).
    public var bandwidthKbps: Int?
    /// The fraction of requests answered 503 (0...1), decided by the seeded generator.
    public var failRate: Double?
    /// While true, every request's connection is closed without an answer.
    public var offline: Bool?

    /// Makes conditions; `nil` fields mean "as the level below" (route → global → none).
    public init(latencyMs: Int? = nil, bandwidthKbps: Int? = nil, failRate: Double? = nil, offline: Bool? = nil) {
        self.latencyMs = latencyMs
        self.bandwidthKbps = bandwidthKbps
        self.failRate = failRate
        self.offline = offline
    }

    /// A perfect link.
    public static let none = NetworkConditions()

    /// `self` with the fields `other` sets replacing ours.
    func overridden(by other: NetworkConditions?) -> NetworkConditions {
        guard let other else { return self }
        return NetworkConditions(
            latencyMs: other.latencyMs ?? latencyMs,
            bandwidthKbps: other.bandwidthKbps ?? bandwidthKbps,
            failRate: other.failRate ?? failRate,
            offline: other.offline ?? offline
        )
    }
}

/// How a body of `bytes` is cut and paced at `kbps`: chunks of at most 50 ms of
/// transfer each, every chunk sent after the time its bytes take on the link.
struct PacingPlan: Sendable, Hashable {
    /// Bytes in each chunk.
    var chunks: [Int]
    /// The wait before each chunk.
    var delays: [Duration]

    init(bytes: Int, kbps: Int) {
        let bytesPerSecond = max(1, kbps) * 1000 / 8
        let chunkSize = max(1, bytesPerSecond / 20)  // 50 ms of transfer
        var chunks: [Int] = []
        var remaining = bytes
        while remaining > 0 {
            chunks.append(min(chunkSize, remaining))
            remaining -= chunkSize
        }
        self.chunks = chunks
        self.delays = chunks.map { .nanoseconds(Int64($0) * 1_000_000_000 / Int64(bytesPerSecond)) }
    }

    /// The total time the body takes.
    var duration: Duration { delays.reduce(.zero, +) }
}

/// Applies the conditions to every request except the control routes.
struct ConditionsMiddleware: RouterMiddleware {
    typealias Context = DemoRequestContext
    let state: ServerState

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix("/_") { return try await next(request, context) }
        let conditions = state.conditions(for: path)
        if conditions.offline == true {
            // No answer at all: the connection is closed, as a dead link would leave it.
            context.channel.close(mode: .all, promise: nil)
            throw DeliberateReset()
        }
        if let latency = conditions.latencyMs, latency > 0 {
            try await state.sleep(for: .milliseconds(latency))
        }
        if let rate = conditions.failRate, rate > 0, state.nextUnit() < rate {
            return FaultRoutes.text(.serviceUnavailable, "simulated failure")
        }
        var response = try await next(request, context)
        if state.takeDroppedResponse(for: path) {
            context.channel.close(mode: .all, promise: nil)
            throw DeliberateReset()
        }
        // An event stream never ends, so it cannot be collected and paced: it goes out as written.
        if let kbps = conditions.bandwidthKbps, kbps > 0, response.headers[.contentType] != "text/event-stream" {
            response = await Self.paced(response, kbps: kbps, state: state)
        }
        return response
    }

    /// Re-sends a response body in paced chunks. Bodies are collected first (the
    /// demo routes are small), so the plan knows the size. Concurrent responses
    /// share the bandwidth, as they would share a real link: four downloads at
    /// 120 kbit/s each get a quarter of it.
    static func paced(_ response: Response, kbps: Int, state: ServerState) async -> Response {
        let collector = BodyCollector()
        try? await response.body.write(collector)
        let body = collector.buffer.withLock { $0 }
        let plan = PacingPlan(bytes: body.readableBytes, kbps: kbps)
        var response = response
        response.headers[.contentLength] = "\(body.readableBytes)"
        response.body = .init(contentLength: body.readableBytes) { writer in
            var offset = 0
            for (size, delay) in zip(plan.chunks, plan.delays) {
                // One link for every connection: each chunk waits for its turn on it.
                try await state.sleep(for: state.reserveLink(for: delay))
                try await writer.write(body.getSlice(at: offset, length: size)!)
                offset += size
            }
            try await writer.finish(nil)
        }
        return response
    }
}

/// Collects a response body in memory.
final class BodyCollector: ResponseBodyWriter, Sendable {
    let buffer = Mutex(ByteBuffer())

    func write(_ buffer: ByteBuffer) async throws {
        var incoming = buffer
        _ = self.buffer.withLock { $0.writeBuffer(&incoming) }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
