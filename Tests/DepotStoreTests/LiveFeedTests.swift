import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing
import TimelineKit

/// `LiveFeed` and the change feed against a real depot-server over loopback:
/// its Timeline routes, `/timeline/changes` and `/timeline/events`.
@MainActor
@Suite(.timeLimit(.minutes(2))) struct LiveFeedTests {
    struct Session {
        let server: DemoServer
        let store: Store
        let transport: ScriptedTransport
        let controller: NetworkController

        /// The server's posts, newest first, read past the session's transport.
        func serverPosts() async throws -> [TimelinePost] {
            let response = try await get("timeline?limit=100000")
            return try JSONDecoder().decode([TimelinePost].self, from: response.body)
        }

        /// The posts in the cache, newest first.
        func cachedPosts() async throws -> [TimelinePost] {
            try await store.read { db in try TimelinePost.order(Column("id").desc).fetchAll(db) }
        }

        func get(_ path: String) async throws -> NetworkResponse {
            let transport = AsyncHTTPClientTransport()
            defer { Task { await transport.shutdown() } }
            let url = URL(string: server.baseURL.absoluteString + "/" + path)!
            let response = try await transport.send(TransportRequest(url: url, timeout: .seconds(10)))
            var body = Data()
            for try await chunk in response.body { body.append(chunk) }
            return NetworkResponse(status: response.status, headers: response.headers, body: body, url: url)
        }

        func control(_ json: String) async throws {
            let transport = AsyncHTTPClientTransport()
            let url = server.baseURL.appending(path: "_control")
            let response = try await transport.send(TransportRequest(url: url, method: .post, headers: ["Content-Type": "application/json"], body: Data(json.utf8), timeout: .seconds(10)))
            for try await _ in response.body {}
            await transport.shutdown()
            #expect(response.status == 200)
        }
    }

    enum Client: String, CaseIterable, Sendable {
        case asyncHTTPClient, urlSession

        func transport() -> any Transport {
            switch self {
            case .asyncHTTPClient: AsyncHTTPClientTransport()
            case .urlSession: URLSessionTransport()
            }
        }
    }

    func withSession<T>(
        _ server: DemoServer.Configuration = .init(seed: 7),
        limit: Int? = nil,
        client: Client = .asyncHTTPClient,
        _ body: (Session) async throws -> T
    ) async throws -> T {
        try await DemoServer.withRunning(server) { server in
            try await StoreFixtures.withStore(migrator: TimelineSchema.migrator) { store in
                let transport = ScriptedTransport(forwardingTo: client.transport())
                var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: transport, observability: .init(notificationCenter: nil))
                configuration.store = store
                configuration.environment.seed = 1
                if let limit { configuration.limits.concurrency = .fixed(limit) }
                let controller = NetworkController(configuration: configuration)
                let session = Session(server: server, store: store, transport: transport, controller: controller)
                do {
                    let result = try await body(session)
                    _ = await controller.shutdown(grace: .zero)
                    return result
                } catch {
                    _ = await controller.shutdown(grace: .zero)
                    throw error
                }
            }
        }
    }

    /// Waits until the status says `state`.
    func until(_ status: SyncStatus, is state: LiveState) async {
        for await update in status.updates() where update.live == state { return }
    }

    /// Waits until the feed's events brought `count` changes, and returns them.
    func changes(_ events: DepotStream<LiveFeedEvent<TimelineChange>>, count: Int) async -> [TimelineChange] {
        var seen: [TimelineChange] = []
        for await event in events {
            if case .applied(let changes) = event { seen += changes }
            if seen.count >= count { break }
        }
        return seen
    }

    @Test(arguments: Client.allCases)
    func theFirstWatchSyncsInFullThenFollowsTheStream(client: Client) async throws {
        try await withSession(client: client) { session in
            let feed = try LiveFeed(TimelineFeed(), controller: session.controller)
            let events = feed.events()
            let watch = feed.watch()
            await until(feed.status, is: .live)
            // The full sync brought the server's 30 posts and its cursor.
            #expect(try await session.cachedPosts() == session.serverPosts())
            #expect(try await session.store.ledger.cursor(for: TimelineFeed.syncKey) == "0")

            // When another client posts 3 and deletes 1
            try await session.control(#"{"timelineChanges": {"posts": 3, "deletes": 1}}"#)
            let seen = await changes(events, count: 4)
            #expect(seen.filter { if case .post = $0 { true } else { false } }.count == 3)
            #expect(seen.filter { if case .delete = $0 { true } else { false } }.count == 1)
            // Then the cache is the server's, and the cursor is the last change's
            #expect(try await session.cachedPosts() == session.serverPosts())
            #expect(try await session.store.ledger.cursor(for: TimelineFeed.syncKey) == "4")
            #expect(try await session.store.ledger.appliedChanges(for: TimelineFeed.syncKey) == 4)
            watch.cancel()
        }
    }

    @Test func catchingUpBringsOnlyWhatChangedInPages() async throws {
        try await withSession { session in
            let feed = try LiveFeed(TimelineFeed(pageSize: 40), controller: session.controller)
            let first = try await feed.catchUp()
            #expect(first.fullSync && first.changes == 0)
            // Given 100 changes while the app was away
            try await session.control(#"{"timelineChanges": {"posts": 80, "deletes": 20}}"#)
            let requestsBefore = session.transport.exchanges.count
            let states = Recorder(feed.status.updates())
            let report = try await feed.catchUp()
            // The status counted the changes page by page, then said up to date.
            for count in [0, 40, 80, 100] {
                _ = try await states.next { $0.live == .catchingUp(changes: count) }
            }
            _ = try await states.next { $0.live == .upToDate }
            // Then three pages of changes came, not the whole timeline again
            #expect(report == CatchUpReport(changes: 100, pages: 3, fullSync: false, cursor: "100"))
            #expect(session.transport.exchanges.count - requestsBefore == 3)
            #expect(try await session.cachedPosts() == session.serverPosts())
            // And a second catch-up finds nothing new
            #expect(try await feed.catchUp() == CatchUpReport(changes: 0, pages: 1, fullSync: false, cursor: "100"))
        }
    }

    @Test func aCursorTheServerNoLongerKeepsStartsOverWithOneChangeSet() async throws {
        try await withSession(.init(seed: 7, changeHistory: 10)) { session in
            let feed = try LiveFeed(TimelineFeed(), controller: session.controller)
            try await feed.catchUp()
            let results = try ResultsController(store: session.store, request: TimelinePost.order(Column("id").desc))
            let before = Set(results.fetchedObjects.map(\.id))
            // Given more changes than the server keeps
            try await session.control(#"{"timelineChanges": {"posts": 25, "deletes": 5}}"#)
            let report = try await feed.catchUp()
            // Then the server's 410 led to a full sync
            #expect(report.fullSync)
            #expect(report.cursor == "30")
            let server = try await session.serverPosts()
            #expect(try await session.cachedPosts() == server)
            // And the results saw it as one change set: what went and what came,
            // not everything deleted and then everything inserted
            await session.store.settled()
            let after = Set(server.map(\.id))
            #expect(results.fetchedObjects == server)
            let changes = try #require(results.lastChanges)
            #expect(changes.deleted.count == before.subtracting(after).count)
            #expect(changes.inserted.count == after.subtracting(before).count)
            #expect(changes.inserted.count < server.count)
        }
    }

    @Test func theStreamHoldsNoSlotAndNeverHoldsUpShutdown() async throws {
        try await withSession(limit: 1) { session in
            let feed = try LiveFeed(TimelineFeed(), controller: session.controller)
            let watch = feed.watch()
            await until(feed.status, is: .live)
            // With one slot and the stream open, a fetch still runs: the stream holds none.
            #expect(session.controller.activity.running == 1)
            let fetched = try await session.controller.perform(FetchTimeline(limit: 5))
            #expect(fetched == .updated(0))
            // And shutdown, however long its grace, cancels the stream at once instead of waiting.
            let report = await session.controller.shutdown(grace: .seconds(3600))
            #expect(report.cancelled == 1)
            #expect(!report.graceExpired)
            watch.cancel()
        }
    }

    @Test func aStreamTheServerCannotResumeCatchesUpThroughAFullSync() async throws {
        try await withSession(.init(seed: 7, changeHistory: 10)) { session in
            let feed = try LiveFeed(TimelineFeed(), controller: session.controller)
            try await feed.catchUp()
            // Given 30 changes while the app was away, more than the server keeps
            try await session.control(#"{"timelineChanges": {"posts": 25, "deletes": 5}}"#)
            let events = feed.events()
            let watch = feed.watch()
            // When the stream opens from cursor 0, the server sends a reset; the
            // feed catches up (410 from the change feed: a full sync), then goes live
            for await event in events {
                if case .replaced = event { break }
            }
            await until(feed.status, is: .live)
            #expect(try await session.cachedPosts() == session.serverPosts())
            #expect(try await session.store.ledger.cursor(for: TimelineFeed.syncKey) == "30")
            try await session.control(#"{"timelineChanges": {"posts": 1}}"#)
            #expect(await changes(events, count: 1).count == 1)
            #expect(try await session.store.ledger.cursor(for: TimelineFeed.syncKey) == "31")
            watch.cancel()
        }
    }

    @Test func aStreamCutInTheMiddleOfAnEventResumesWithNothingLostOrRepeated() async throws {
        try await withSession { session in
            let feed = try LiveFeed(TimelineFeed(), controller: session.controller)
            let events = feed.events()
            let watch = feed.watch()
            await until(feed.status, is: .live)
            // The server sends half of the next event, then closes the connection.
            try await session.control(#"{"cutStreamsMidEvent": true, "timelineChanges": {"posts": 1}}"#)
            try await session.control(#"{"timelineChanges": {"posts": 2}}"#)
            let seen = await changes(events, count: 3)
            #expect(seen.count == 3)
            #expect(try await session.cachedPosts() == session.serverPosts())
            #expect(try await session.store.ledger.cursor(for: TimelineFeed.syncKey) == "3")
            #expect(try await session.store.ledger.appliedChanges(for: TimelineFeed.syncKey) == 3)
            // Two connections: the cut one, and the one that resumed after event 0.
            let streams = session.transport.exchanges.filter { $0.request.url.path == "/timeline/events" }
            #expect(streams.map { $0.request.headers["Last-Event-ID"] } == ["0", "0"])
            watch.cancel()
        }
    }

    @Test func tenThousandChangesAfterAnOfflineSpellComeInPages() async throws {
        try await withSession(.init(seed: 7, changeHistory: 20_000)) { session in
            let feed = try LiveFeed(TimelineFeed(), controller: session.controller)
            try await feed.catchUp()
            try await session.control(#"{"timelineChanges": {"posts": 9000, "deletes": 1000}}"#)
            let report = try await feed.catchUp()
            #expect(report == CatchUpReport(changes: 10_000, pages: 20, fullSync: false, cursor: "10000"))
            #expect(try await session.cachedPosts() == session.serverPosts())
            #expect(try await session.store.ledger.appliedChanges(for: TimelineFeed.syncKey) == 10_000)
        }
    }
}
