import Foundation
import Seeded
import Synchronization

/// State shared by the route handlers.
final class ServerState: Sendable {
    let configuration: DemoServer.Configuration
    let feed: ForumFeed
    let stats = Mutex(DemoServer.Stats())
    let boundPort = Mutex(0)
    let crossOriginPort = Mutex(0)
    let crossOriginHeaders = Mutex<[String: String]?>(nil)
    let stopping = Mutex(false)
    /// The gates ``DemoServer/Fault/gated(_:)`` and ``DemoServer/Fault/hang`` wait at.
    let gates = Gates()
    /// What arrived on the fault routes, and which responses their clients abandoned.
    let requestLog = RequestLog()
    /// Timeline's posts and their changes (``TimelineRoutes``).
    let timeline: ChangeFeed<TimelineRoutes.Model, TimelineRoutes.Change>
    /// The CRM's store and its changes (``SenbeiRoutes``).
    let crm: ChangeFeed<SenbeiRoutes.Store, SenbeiRoutes.Change>
    /// Whether event streams send keep-alives (`POST /_control {"heartbeats": false}`).
    private let heartbeats = Mutex(true)
    /// How many `cutStreams` and `cutStreamsMidEvent` controls there have been:
    /// a stream whose request came before one, but which was not listening
    /// yet, compares these to know it was cut too.
    private let cuts = Mutex(StreamCuts())
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
        self.timeline = TimelineRoutes.makeFeed(configuration)
        // Server time starts at 0, so today is the epoch's day.
        self.crm = SenbeiRoutes.makeFeed(configuration, today: configuration.epoch)
    }

    /// Counts a request with an `Idempotency-Key` that reached a write route
    /// (``IdempotencyKeys``), for ``DemoServer/Stats/idempotencyKeys``.
    func countDelivery(ofIdempotencyKey key: String, route: String) {
        stats.withLock { $0.idempotencyKeys[key, default: [:]][route, default: 0] += 1 }
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
        controlStreams(request)
    }

    /// The change-feed part of a `POST /_control` request, in this order:
    /// reset, history, heartbeats, arming the mid-event cut, the changes, the cut.
    /// So `{"cutStreamsMidEvent": true, "timelineChanges": {"posts": 1}}` cuts
    /// every open Timeline stream in the middle of that new post's event.
    private func controlStreams(_ request: ControlRequest) {
        if request.reset == true {
            heartbeats.withLock { $0 = true }
            timeline.resize(to: configuration.changeHistory)
            crm.resize(to: configuration.changeHistory)
        }
        if let history = request.changeHistory {
            timeline.resize(to: history)
            crm.resize(to: history)
        }
        if let on = request.heartbeats { heartbeats.withLock { $0 = on } }
        if request.cutStreamsMidEvent == true {
            cuts.withLock { $0.midEvent += 1 }
            timeline.ring(.cutMidEvent)
            crm.ring(.cutMidEvent)
        }
        if let changes = request.timelineChanges {
            timeline.write { model, log in model.makeChanges(posts: changes.posts ?? 0, deletes: changes.deletes ?? 0, log: &log) }
        }
        if let changes = request.crmChanges {
            crm.write { store, log in store.makeChanges(contacts: changes.contacts ?? 0, tasks: changes.tasks ?? 0, log: &log) }
        }
        if request.cutStreams == true {
            cuts.withLock { $0.all += 1 }
            timeline.ring(.cut)
            crm.ring(.cut)
        }
    }

    /// The counts of stream cuts so far.
    var streamCuts: StreamCuts { cuts.withLock { $0 } }

    /// Whether event streams send keep-alives now.
    var heartbeatsEnabled: Bool { heartbeats.withLock { $0 } }

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

    /// Marks the server as stopping: endless bodies and event streams end, and every handler
    /// waiting at a gate fails, so a graceful shutdown is not held up by them.
    func beginStopping() {
        stopping.withLock { $0 = true }
        gates.closeAll()
        requestLog.close()
        timeline.ring(.stop)
        crm.ring(.stop)
    }

    var isStopping: Bool { stopping.withLock { $0 } }

    /// Server time since start.
    var elapsed: Duration { elapsedNow() }

    /// The wall-clock date of server time now.
    var now: Date {
        configuration.epoch.addingTimeInterval(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}

/// How many times `POST /_control` has cut the event streams.
struct StreamCuts: Sendable, Equatable {
    /// `"cutStreams"` controls.
    var all = 0
    /// `"cutStreamsMidEvent"` controls.
    var midEvent = 0

    /// The cuts made since `earlier`, as the doorbell signals a stream that missed them gets.
    func signals(since earlier: StreamCuts) -> Doorbell.Signals {
        var signals: Doorbell.Signals = []
        if all != earlier.all { signals.insert(.cut) }
        if midEvent != earlier.midEvent { signals.insert(.cutMidEvent) }
        return signals
    }
}
