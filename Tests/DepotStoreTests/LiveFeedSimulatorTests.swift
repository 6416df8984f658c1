import Depot
@testable import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
import TimelineKit

/// `LiveFeed` on `NetworkSimulator`'s scripted streams and a `ManualClock`:
/// reconnects, backoff, offline spells, the linger and the idle deadline,
/// the same every run.
@MainActor
@Suite(.timeLimit(.minutes(2))) struct LiveFeedSimulatorTests {
    /// One connection to the stream: when it opened and what it resumed from.
    struct Connection: Sendable, Equatable {
        var at: Duration
        var lastEventID: String?
    }

    /// What the stream route saw.
    final class Connections: Sendable {
        let clock: ManualClock
        private let seen = Mutex<[Connection]>([])

        init(clock: ManualClock) { self.clock = clock }

        var all: [Connection] { seen.withLock { $0 } }

        func record(_ request: TransportRequest) -> String? {
            let id = request.headers["Last-Event-ID"]
            seen.withLock { $0.append(Connection(at: clock.elapsed, lastEventID: id)) }
            return id
        }
    }

    struct Session {
        let clock: ManualClock
        let simulator: NetworkSimulator
        let store: Store
        let controller: NetworkController
        let feed: LiveFeed<TimelineFeed>
        let connections: Connections

        /// Time moves only while the controller's work waits on the link or
        /// the clock, and the feed's driver waits on the controller or the
        /// clock with everything it heard handled (its status is up to date).
        var settled: @Sendable () -> Bool {
            let controller = simulator.settled(with: self.controller)
            let feed = feed
            let clock = clock
            // A sleeping driver has parked once its sleep reached the clock.
            return { controller() && feed.isParked && (!feed.isSleeping || clock.sleeperCount > 0) }
        }

        func run(until condition: @escaping @Sendable () -> Bool) async throws {
            try await simulator.run(until: condition, quietYields: 64, settled: settled)
        }

        func run(for duration: Duration) async throws {
            try await simulator.run(until: clock.elapsed + duration, quietYields: 64, settled: settled)
        }

        func posts() throws -> [Int] {
            try store.writer.read { db in try Int.fetchAll(db, sql: "SELECT id FROM post ORDER BY id") }
        }

        func cursor() throws -> String? {
            try store.writer.read { db in try SyncLedger.cursor(for: TimelineFeed.syncKey, in: db) }
        }
    }

    nonisolated static func post(_ id: Int) -> String {
        #"{"id":\#(id),"author":"a","text":"post \#(id)","avatar":"/avatars/1.png"}"#
    }

    nonisolated static func event(_ id: Int) -> String {
        "id: \(id)\nevent: post\ndata: \(post(id))\n\n"
    }

    /// A session whose stream answers each connection with `script(lastEventID)`;
    /// the full sync finds an empty timeline at cursor 0.
    func withSession<T>(
        timeline: [NetworkSimulator.Change] = [],
        configuration: LiveFeed<TimelineFeed>.Configuration = .init(),
        script: @escaping @Sendable (String?) -> NetworkSimulator.StreamScript,
        _ body: (Session) async throws -> T
    ) async throws -> T {
        let clock = ManualClock()
        let connections = Connections(clock: clock)
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 10_000_000, rtt: .milliseconds(50)), routes: [
            .init(path: "/timeline/events", stream: { request in script(connections.record(request)) }),
            .init(path: "/timeline", body: Data("[]".utf8), headers: ["Change-Cursor": "0", "Content-Type": "application/json"]),
        ], timeline: timeline)
        let environment = DepotEnvironment(clock: clock, seed: 1)
        let store = try Store.inMemory(migrator: TimelineSchema.migrator, environment: environment)
        var settings = NetworkController.Configuration(baseURL: URL(string: "http://timeline.test")!, transport: simulator, observability: .init(notificationCenter: nil), environment: environment)
        settings.store = store
        let controller = NetworkController(configuration: settings)
        let feed = try LiveFeed(TimelineFeed(), controller: controller, configuration: configuration)
        let session = Session(clock: clock, simulator: simulator, store: store, controller: controller, feed: feed, connections: connections)
        let result = try await body(session)
        _ = await controller.shutdown(grace: .zero)
        return result
    }

    @Test func aDropReconnectsFromTheKeptCursorAfterABackoff() async throws {
        try await withSession(script: { lastEventID in
            switch lastEventID {
            case "0": .init(steps: [.send(Self.event(1), after: .seconds(1)), .drop(after: .seconds(1))])
            default: .init(steps: [.send(Self.event(2), after: .seconds(1))])
            }
        }) { session in
            let watch = session.feed.watch()
            try await session.run { (try? session.posts()) == [1, 2] }
            let connections = session.connections.all
            #expect(connections.map(\.lastEventID) == ["0", "1"])
            // The drop came 2 s after the first head; the controller's retry
            // policy waited (500 ms, with jitter) before the second connection.
            let gap = connections[1].at - connections[0].at
            #expect(gap > .seconds(2) && gap < .seconds(4), "\(gap)")
            #expect(try session.cursor() == "2")
            #expect(session.feed.status.live == .live)
            watch.cancel()
        }
    }

    @Test func aServerCloseReconnectsNoSoonerThanItsRetry() async throws {
        try await withSession(script: { lastEventID in
            switch lastEventID {
            case "0": .init(steps: [.send("retry: 5000\n" + Self.event(1), after: .seconds(1)), .close(after: .zero)])
            default: .init(steps: [])
            }
        }) { session in
            let watch = session.feed.watch()
            try await session.run { session.connections.all.count == 2 }
            let connections = session.connections.all
            #expect(connections[1].lastEventID == "1")
            let gap = connections[1].at - connections[0].at
            // Closed about 1 s after the first connection: then 5 to 7.5 s.
            #expect(gap >= .seconds(6) && gap < .seconds(30), "\(gap)")
            watch.cancel()
        }
    }

    @Test func offlineTheStreamWaitsAndResumesWhenTheNetworkIsBack() async throws {
        try await withSession(timeline: NetworkSimulator.Change.offline(from: .seconds(3), until: .seconds(20)), script: { lastEventID in
            switch lastEventID {
            case "0": .init(steps: [.send(Self.event(1), after: .seconds(1))])
            default: .init(steps: [.send(Self.event(2), after: .zero)])
            }
        }) { session in
            let states = Recorder(session.feed.status.updates())
            let watch = session.feed.watch()
            // Time moves only once the feed handled what it heard: in the
            // middle of the spell its status says so.
            try await session.run(for: .seconds(10))
            #expect(session.feed.status.live == .offline)
            #expect(try session.posts() == [1])
            try await session.run { (try? session.posts()) == [1, 2] }
            #expect(session.feed.status.live == .live)
            // The spell cut the stream; it said offline, and came back from event 1 after the spell.
            _ = try await states.next { $0.live == .offline }
            _ = try await states.next { $0.live == .live }
            let connections = session.connections.all
            #expect(connections.first?.lastEventID == "0")
            #expect(connections.last?.lastEventID == "1")
            #expect(try #require(connections.last).at >= .seconds(20))
            watch.cancel()
        }
    }

    @Test func anUnwatchedStreamClosesAfterItsLingerAndReopensWhenWatchedAgain() async throws {
        try await withSession(configuration: .init(linger: .seconds(10)), script: { _ in .init(steps: [.send(Self.event(1), after: .seconds(1))]) }) { session in
            var watch: LiveFeed<TimelineFeed>.Watch? = session.feed.watch()
            try await session.run { (try? session.posts()) == [1] }
            #expect(session.simulator.openTransferCount == 1)
            // Nobody watches from now on: open for the linger, then closed.
            let sleepers = session.clock.sleeperCount
            watch?.cancel()
            watch = nil
            let unwatched = session.clock.elapsed
            // The linger's sleep reached the clock: time may move.
            await session.clock.sleepers(atLeast: sleepers + 1)
            try await session.run(for: .seconds(9))
            #expect(session.simulator.openTransferCount == 1)
            try await session.run { session.simulator.openTransferCount == 0 }
            #expect(session.clock.elapsed - unwatched == .seconds(10))
            #expect(!session.feed.isRunning)
            #expect(session.feed.status.live == .upToDate)
            // Watched again: it reopens from where the cache is.
            let again = session.feed.watch()
            try await session.run { session.connections.all.count == 2 }
            #expect(session.connections.all.last?.lastEventID == "1")
            again.cancel()
        }
    }

    @Test func aStreamThatSendsNothingIsCaughtByTheIdleDeadlineButHeartbeatsKeepItOpen() async throws {
        try await withSession(configuration: .init(idleDeadline: .seconds(45)), script: { lastEventID in
            switch lastEventID {
            // Silent after its first event.
            case "0": .init(steps: [.send(Self.event(1), after: .seconds(1))])
            // Only heartbeats, every 15 s, forever.
            default: .init(step: { _ in .send(": keep-alive\n\n", after: .seconds(15)) })
            }
        }) { session in
            let watch = session.feed.watch()
            try await session.run { session.connections.all.count == 2 }
            let connections = session.connections.all
            // 45 s without a byte after event 1, then the retry's backoff.
            let gap = connections[1].at - connections[0].at
            #expect(gap >= .seconds(46) && gap < .seconds(48), "\(gap)")
            // The second one sends only heartbeats: ten minutes, and still the same connection.
            try await session.run(for: .seconds(600))
            #expect(session.connections.all.count == 2)
            watch.cancel()
        }
    }

    @Test func anEventThatCannotBeProcessedIsSkippedAndTheStreamGoesOn() async throws {
        try await withSession(script: { _ in
            .init(steps: [.send("id: 1\nevent: post\ndata: {\"id\": \"not a number\"}\n\n" + Self.event(2), after: .seconds(1))])
        }) { session in
            let events = Recorder(session.feed.events())
            let watch = session.feed.watch()
            try await session.run { (try? session.posts()) == [2] }
            if case .skipped(let error) = try await events.next(where: { if case .skipped = $0 { true } else { false } }) {
                #expect(error.code == .decoding)
            }
            #expect(session.feed.status.skippedEvents == 1)
            #expect(session.feed.status.lastError?.code == .decoding)
            #expect(try session.cursor() == "2")
            #expect(session.connections.all.count == 1)
            watch.cancel()
        }
    }

    @Test func anEventCutOffBeforeItsBlankLineIsNeverApplied() async throws {
        try await withSession(script: { lastEventID in
            switch lastEventID {
            // Event 2 loses its blank line: the connection drops first.
            case "0": .init(steps: [.send(Self.event(1) + "id: 2\nevent: post\ndata: \(Self.post(2))\n", after: .seconds(1)), .drop(after: .seconds(1))])
            default: .init(steps: [.send(Self.event(2), after: .seconds(1))])
            }
        }) { session in
            let watch = session.feed.watch()
            try await session.run { session.connections.all.count == 2 }
            // Only event 1 landed; the next connection resumes after it and gets 2 whole.
            #expect(try session.posts() == [1])
            #expect(session.connections.all.last?.lastEventID == "1")
            try await session.run { (try? session.posts()) == [1, 2] }
            #expect(try await session.store.ledger.appliedChanges(for: TimelineFeed.syncKey) == 2)
            watch.cancel()
        }
    }

    /// The timeline's feed, whose `poke` events name a key to refresh.
    struct PokingFeed: ChangeFeed {
        let timeline = TimelineFeed()
        var syncKey: String { timeline.syncKey }
        var snapshotRequest: NetworkRequest { timeline.snapshotRequest }
        var eventsRequest: NetworkRequest? { timeline.eventsRequest }
        func changesRequest(after cursor: String) -> NetworkRequest { timeline.changesRequest(after: cursor) }
        func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<TimelineChange> { try timeline.decodeChanges(response) }
        func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<TimelineChange> { try timeline.decodeSnapshot(response) }
        func apply(_ change: TimelineChange, to db: Database) throws { try timeline.apply(change, to: db) }
        func removeAll(from db: Database) throws { try timeline.removeAll(from: db) }
        func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<TimelineChange> {
            event.type == "poke" ? .invalidate([.key(event.data)]) : try timeline.decodeEvent(event)
        }
    }

    @Test func aPokeMarksItsKeyStaleInTheEventsTransaction() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 10_000_000, rtt: .milliseconds(50)), routes: [
            .init(path: "/timeline/events", stream: { _ in .init(steps: [.send("id: 1\nevent: poke\ndata: avatars\n\n", after: .seconds(1))]) }),
            .init(path: "/timeline", body: Data("[]".utf8), headers: ["Change-Cursor": "0", "Content-Type": "application/json"]),
        ])
        let environment = DepotEnvironment(clock: clock, seed: 1)
        let store = try Store.inMemory(migrator: TimelineSchema.migrator, environment: environment)
        try await store.writer.write { db in try SyncLedger.recordSuccess(for: "avatars", at: Date(), validators: nil, in: db) }
        var settings = NetworkController.Configuration(baseURL: URL(string: "http://timeline.test")!, transport: simulator, observability: .init(notificationCenter: nil), environment: environment)
        settings.store = store
        let controller = NetworkController(configuration: settings)
        let feed = try LiveFeed(PokingFeed(), controller: controller)
        let watch = feed.watch()
        let stale: @Sendable () -> Bool = { (try? store.writer.read { db in try SyncLedger.entry(for: "avatars", in: db)?.isStale }) == true }
        let controllerSettled = simulator.settled(with: controller)
        try await simulator.run(until: stale, quietYields: 64, settled: { controllerSettled() && feed.isParked })
        // The poke moved the cursor with it, and nothing else was written.
        #expect(try await store.writer.read { db in try SyncLedger.cursor(for: TimelineFeed.syncKey, in: db) } == "1")
        #expect(try await store.writer.read { db in try TimelinePost.fetchCount(db) } == 0)
        watch.cancel()
        _ = await controller.shutdown(grace: .zero)
    }
}
