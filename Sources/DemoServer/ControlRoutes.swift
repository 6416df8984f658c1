import Foundation
import Hummingbird
import NIOCore

/// The body of `POST /_control`: conditions, optionally for one route path, or a reset.
struct ControlRequest: Codable {
    var route: String?
    var latencyMs: Int?
    var bandwidthKbps: Int?
    var failRate: Double?
    var offline: Bool?
    /// The next this many requests (on `route`, or on any path) are handled,
    /// effects and all, and then their connection is closed instead of
    /// answering: the "did my POST go through?" case.
    var dropResponses: Int?
    var reset: Bool?

    var conditions: NetworkConditions {
        NetworkConditions(latencyMs: latencyMs, bandwidthKbps: bandwidthKbps, failRate: failRate, offline: offline)
    }
}

/// `POST /_control`, which changes the link's conditions at runtime, and
/// `GET /_stats`, the counters as JSON. Conditions never apply to these routes.
enum ControlRoutes {
    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        router.post("/_control") { request, _ in
            let data = try await request.body.collect(upTo: 64 * 1024)
            guard let control = try? JSONDecoder().decode(ControlRequest.self, from: data) else {
                return FaultRoutes.text(.unprocessableContent, "expected JSON like {\"route\": \"/forum/rss\", \"latencyMs\": 200}")
            }
            if let kbps = control.bandwidthKbps, !(1...10_000_000).contains(kbps) {
                return FaultRoutes.text(.unprocessableContent, "bandwidthKbps must be between 1 and 10000000")
            }
            if let latency = control.latencyMs, !(0...600_000).contains(latency) {
                return FaultRoutes.text(.unprocessableContent, "latencyMs must be between 0 and 600000")
            }
            if let drops = control.dropResponses, drops < 0 {
                return FaultRoutes.text(.unprocessableContent, "dropResponses must not be negative")
            }
            if let rate = control.failRate, !(0...1).contains(rate) {
                return FaultRoutes.text(.unprocessableContent, "failRate must be between 0 and 1")
            }
            state.control(control)
            let current = try JSONEncoder.sorted.encode(state.conditions(for: control.route ?? "/"))
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: current)))
        }
        router.get("/_stats") { _, _ in
            let data = try JSONEncoder().encode(state.stats.withLock { $0 })
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
    }
}
