import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import TimelineKit

/// A controller on a simulated link and a ManualClock, with a Timeline store:
/// the timing parts of the Timeline tests, the same every run.
struct SimulatedTimeline {
    static let base = URL(string: "http://timeline.test")!

    let clock = ManualClock()
    let simulator: NetworkSimulator
    let controller: NetworkController
    let store: Store
    let trace = TraceRecorder()
    /// The controller's events from the start, for what the app does on the
    /// main actor, which the driver cannot see.
    let events: Recorder<NetworkEvent>

    /// - Parameters:
    ///   - kbps: The link's bandwidth.
    ///   - rtt: The link's round trip.
    ///   - avatars: How many distinct avatars the server has (12 as on depot-server).
    ///   - postLatency: The server's time to answer a post.
    ///   - cached: Posts already in the cache when the app starts (avatars not cached).
    ///   - timeline: Link changes over time.
    init(kbps: Double, rtt: Duration, avatars: Int = 12, postLatency: Duration = .zero, cached: [TimelinePost] = [], timeline: [NetworkSimulator.Change] = []) throws {
        let posts = (1...30).map { TimelinePost(id: $0, author: "user\($0 % avatars + 1)", text: "post \($0)", avatar: "/avatars/\($0 % avatars + 1).png") }
        let created = TimelinePost(id: 31, author: "you", text: "hello", avatar: "/avatars/1.png")
        simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: kbps * 1000, rtt: rtt), routes: [
            .init(path: "/timeline", body: try JSONEncoder().encode(posts.reversed() as [TimelinePost])),
            .init(path: "/posts", status: 201, body: try JSONEncoder().encode(created), latency: postLatency),
            // 20 KB that start like a PNG file.
            .init(path: "/avatars/*", body: Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) + Data(count: 20_000)),
        ], timeline: timeline, chunkSize: 1024)  // small chunks, as a slow real link delivers them
        store = try Store.inMemory(migrator: TimelineSchema.migrator)
        try store.writeSync { db in for post in cached { try post.insert(db) } }
        var configuration = NetworkController.Configuration(baseURL: Self.base, transport: simulator, observability: .init(notificationCenter: nil), environment: .init(clock: clock))
        configuration.store = store
        configuration.observability.trace = trace
        configuration.conditions.rules = TimelineApp.qualityRules
        configuration.environment.seed = 7
        controller = NetworkController(configuration: configuration)
        events = Recorder(controller.events())
    }

    /// Drives the link until `condition` holds. The app reacts on the main
    /// actor (a finished refresh asks for avatars), which the driver cannot
    /// see: it waits for more quiet yields than a controller-only test needs.
    ///
    /// - Parameter ready: Time stands still until it holds (something the
    ///   app must have begun at this instant, such as a quit).
    func run(until condition: @escaping @Sendable () -> Bool, ready: @escaping @Sendable () -> Bool = { true }) async throws {
        let settled = simulator.settled(with: controller)
        try await simulator.run(until: condition, quietYields: 64, settled: { ready() && settled() })
    }

    /// Returns once the app has given the controller work, with the clock
    /// standing still: the driver only sees the controller, so it must not
    /// start before the app has enqueued anything.
    func waitForWork() async throws {
        _ = try await events.next { $0.kind == .enqueued }
    }

    /// Returns once the app has enqueued `count` operations named `name` in
    /// all, with the clock standing still: for what the app does on the main
    /// actor in reaction to a result.
    func waitForEnqueued(_ name: String, count: Int) async throws {
        let enqueued: @Sendable (NetworkEvent) -> Bool = { $0.kind == .enqueued && $0.operation == name }
        while events.values.filter(enqueued).count < count {
            _ = try await events.next(where: enqueued)
        }
    }

    /// The trace's entries for operations named `name`.
    func entries(_ name: String) -> [Trace.Entry] {
        trace.trace().entries.filter { $0.name == name }
    }

    /// The cached avatars' paths.
    func cachedAvatars() throws -> Set<String> {
        try store.readSync { db in Set(try String.fetchAll(db, sql: "SELECT id FROM avatar")) }
    }
}

/// Thirty cached posts over twelve avatars, as a previous session would leave them.
let cachedPosts = (1...30).map { TimelinePost(id: $0, author: "user\($0 % 12 + 1)", text: "post \($0)", avatar: "/avatars/\($0 % 12 + 1).png") }

extension Store {
    /// A blocking write, for test setup (in async code GRDB picks its async overload).
    func writeSync(_ updates: (Database) throws -> Void) throws {
        try writer.write(updates)
    }

    /// A blocking read, for checks.
    func readSync<T>(_ value: (Database) throws -> T) throws -> T {
        try writer.read(value)
    }
}
