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

    /// Marks the server as stopping: endless bodies end, and every handler
    /// waiting at a gate fails, so a graceful shutdown is not held up by them.
    func beginStopping() {
        stopping.withLock { $0 = true }
        gates.closeAll()
        requestLog.close()
    }

    var isStopping: Bool { stopping.withLock { $0 } }

    /// Server time since start.
    var elapsed: Duration { elapsedNow() }

    /// The wall-clock date of server time now.
    var now: Date {
        configuration.epoch.addingTimeInterval(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}
