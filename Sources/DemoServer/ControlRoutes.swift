import Foundation
import Hummingbird
import NIOCore

/// The body of `POST /_control`: conditions, optionally for one route path, or
/// a reset; and, for tests of live data, what the change feeds and their event
/// streams do (``ServerState`` applies those in a fixed order, see `controlStreams`).
struct ControlRequest: Codable {
    /// `"timelineChanges": {"posts": N, "deletes": M}`.
    struct TimelineChanges: Codable {
        /// Seeded posts to create.
        var posts: Int?
        /// Posts to delete, picked by the seed (fewer if fewer exist).
        var deletes: Int?
    }

    /// `"crmChanges": {"contacts": N, "tasks": M}`.
    struct CRMChanges: Codable {
        /// Contacts to create ("Contact N").
        var contacts: Int?
        /// Tasks to create ("Task N", due as soon as possible).
        var tasks: Int?
    }

    var route: String?
    var latencyMs: Int?
    var bandwidthKbps: Int?
    var failRate: Double?
    var offline: Bool?
    /// The next this many requests (on `route`, or on any path) are handled,
    /// effects and all, and then their connection is closed instead of
    /// answering: the "did my POST go through?" case.
    var dropResponses: Int?
    /// Restores the configured conditions, and turns heartbeats on and the
    /// change history back to the configured size.
    var reset: Bool?
    /// Closes every open event stream now: its connection ends.
    var cutStreams: Bool?
    /// Every event stream open now sends the first half of its next change
    /// event (no blank line), then its connection closes; the change is a real
    /// one, sent in full when the client resumes from its last complete event.
    var cutStreamsMidEvent: Bool?
    /// Stops (`false`) or restarts (`true`) the streams' keep-alives.
    var heartbeats: Bool?
    /// Makes Timeline changes server-side, as fast as possible, each numbered.
    var timelineChanges: TimelineChanges?
    /// Makes CRM changes server-side, each numbered.
    var crmChanges: CRMChanges?
    /// How many changes each feed keeps from now on (shrinking drops the oldest).
    var changeHistory: Int?

    var conditions: NetworkConditions {
        NetworkConditions(latencyMs: latencyMs, bandwidthKbps: bandwidthKbps, failRate: failRate, offline: offline)
    }
}

/// `POST /_control`, which changes the link's conditions at runtime, and
/// `GET /_stats`, the counters as JSON. Conditions never apply to these routes.
enum ControlRoutes {
    /// The most changes one control request makes per kind, and the largest change history.
    static let maximumCount = 1_000_000

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
            if let history = control.changeHistory, !(0...maximumCount).contains(history) {
                return FaultRoutes.text(.unprocessableContent, "changeHistory must be between 0 and \(maximumCount)")
            }
            let counts = [control.timelineChanges?.posts, control.timelineChanges?.deletes, control.crmChanges?.contacts, control.crmChanges?.tasks]
            if counts.contains(where: { count in count.map { !(0...maximumCount).contains($0) } ?? false }) {
                return FaultRoutes.text(.unprocessableContent, "timelineChanges and crmChanges counts must be between 0 and \(maximumCount)")
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
