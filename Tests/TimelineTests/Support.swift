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
        var configuration = NetworkController.Configuration(baseURL: Self.base, transport: simulator, clock: clock, notificationCenter: nil)
        configuration.store = store
        configuration.trace = trace
        configuration.monitor = TimelineApp.monitorConfiguration
        configuration.qualityRules = TimelineApp.qualityRules
        configuration.jitterSeed = 7
        controller = NetworkController(configuration: configuration)
    }

    /// Drives the link until `condition` holds. The app reacts on the main
    /// actor (a finished refresh asks for avatars), which the driver cannot
    /// see: it waits for more quiet yields than a controller-only test needs.
    func run(until condition: @escaping @Sendable () -> Bool) async throws {
        try await simulator.run(until: condition, quietYields: 64, settled: simulator.settled(with: controller))
    }

    /// Lets the app's main-actor tasks run until the controller has work: the
    /// driver only sees the controller, so it must not start before the app has
    /// enqueued anything.
    @MainActor
    func waitForWork() async {
        await waitForApp { controller.activity.queued + controller.activity.running + controller.activity.blocked > 0 }
    }

    /// Lets the app's main-actor tasks run, with the clock standing still,
    /// until `condition` holds: for what the app does in reaction to a result.
    @MainActor
    func waitForApp(_ condition: () -> Bool) async {
        while !condition() { await Task.yield() }
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
