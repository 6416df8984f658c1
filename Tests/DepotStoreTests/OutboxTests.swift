import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// The outbox against a real store file and the demo server's `POST /posts`,
/// which honours `Idempotency-Key` (a replay answers the first answer).
@Suite(.timeLimit(.minutes(1))) struct OutboxTests {
    /// A post as the app shows it: pending until the server gave it an id.
    struct PostRow: Codable, FetchableRecord, PersistableRecord, Sendable, Equatable {
        static let databaseTableName = "post"
        var localID: String
        var serverID: Int?
        var text: String
        var isPending: Bool
    }

    struct SendPost: Mutation {
        struct Payload: Codable, Sendable {
            var localID: String
            var text: String
        }

        static let typeName = "SendPost.v1"
        var payload: Payload
        init(payload: Payload) { self.payload = payload }
        init(_ localID: String, _ text: String) { payload = Payload(localID: localID, text: text) }

        var lane: String { "posts" }
        var request: NetworkRequest { .post("posts", json: ["text": payload.text]) }

        func applyOptimistically(_ db: Database) throws {
            try PostRow(localID: payload.localID, serverID: nil, text: payload.text, isPending: true).upsert(db)
        }

        func commit(_ response: NetworkResponse, _ db: Database) throws {
            struct Sent: Decodable { var id: Int; var text: String }
            let sent = try response.decode(Sent.self)
            try PostRow(localID: payload.localID, serverID: sent.id, text: sent.text, isPending: false).update(db)
        }

        func rollback(_ error: DepotError, _ db: Database) throws {
            _ = try PostRow.deleteOne(db, key: payload.localID)
        }
    }

    /// A CRM task (depot-server's `POST /tasks`, behind HTTP Basic); no local rows.
    struct CreateTask: Mutation {
        static let typeName = "CreateTask"
        var payload: String
        init(payload: String) { self.payload = payload }
        var request: NetworkRequest { .post("tasks", json: ["name": payload]) }
        func applyOptimistically(_ db: Database) throws {}
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    /// A CRM task with its credentials in the request, in a lane of its own.
    struct CreateTaskWithAuth: Mutation {
        static let typeName = "CreateTaskWithAuth"
        var payload: String
        init(payload: String) { self.payload = payload }
        var lane: String { "tasks" }
        var request: NetworkRequest {
            .post("tasks", json: ["name": payload], headers: ["Authorization": "Basic " + Data("admin:secret".utf8).base64EncodedString()])
        }
        func applyOptimistically(_ db: Database) throws {}
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    /// A new version of ``SendPost`` whose payload an older run's rows do not fit.
    struct SendPostV2: Mutation {
        struct Payload: Codable, Sendable { var localID: String; var body: String; var visibility: String }
        static let typeName = "SendPost.v1"   // the same name: the payload changed incompatibly
        var payload: Payload
        init(payload: Payload) { self.payload = payload }
        var request: NetworkRequest { .post("posts", json: ["text": payload.body]) }
        func applyOptimistically(_ db: Database) throws {}
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    /// The timeline refresh: the server's posts replace the table.
    struct RefreshPosts: CachingOperation {
        struct Post: Decodable, Sendable { var id: Int; var text: String }
        var request: NetworkRequest { .get("timeline", query: ["limit": "200"]) }
        var cacheKey: String { "posts" }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Post] {
            try response.decode([Post].self)
        }

        func write(_ posts: [Post], to db: Database) throws -> Int {
            try PostRow.deleteAll(db)
            for post in posts {
                try PostRow(localID: "server-\(post.id)", serverID: post.id, text: post.text, isPending: false).insert(db)
            }
            return posts.count
        }
    }

    /// A mutation whose optimistic change fails: nothing may be queued.
    struct Broken: Mutation {
        static let typeName = "Broken"
        var payload: String
        init(payload: String) { self.payload = payload }
        var request: NetworkRequest { .post("posts", json: ["text": payload]) }
        func applyOptimistically(_ db: Database) throws { try db.execute(sql: "INSERT INTO missingTable VALUES (1)") }
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("posts") { db in
            try db.create(table: "post") { table in
                table.primaryKey("localID", .text)
                table.column("serverID", .integer)
                table.column("text", .text).notNull()
                table.column("isPending", .boolean).notNull()
            }
        }
        return migrator
    }()

    /// What the test needs: a store file, and a way to make controllers on it.
    struct Setup {
        let folder: URL
        var path: String { folder.appending(path: "app.sqlite").path }

        func store() throws -> Store { try Store(path: path, migrator: OutboxTests.migrator) }

        /// A controller whose every request finds no network.
        func offlineController(store: Store) -> NetworkController {
            let transport = FixtureTransport()
            transport.isOffline = true
            return controller(transport, baseURL: URL(string: "http://offline.test")!, store: store)
        }

        func controller(_ transport: any Transport, baseURL: URL, store: Store) -> NetworkController {
            var configuration = NetworkController.Configuration(baseURL: baseURL, transport: transport, notificationCenter: nil)
            configuration.store = store
            return NetworkController(configuration: configuration)
        }
    }

    func withSetup<T>(_ body: (Setup) async throws -> T) async throws -> T {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(Setup(folder: folder))
    }

    /// An outbox on a fresh store file, sending to an in-process demo server.
    func withOnlineOutbox(_ body: (DemoServer, Store, NetworkController, Outbox) async throws -> Void) async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await body(server, store, controller, outbox)
                _ = await controller.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
                try await store.close()
            }
        }
    }

    static func rows(_ store: Store) async throws -> [PostRow] {
        try await store.read { db in try PostRow.order(Column("localID")).fetchAll(db) }
    }

    /// The server's posts with these texts (the seed has others).
    static func serverPosts(_ server: DemoServer, controller: NetworkController, texts: Set<String>) async throws -> [Int: String] {
        struct Post: Decodable { var id: Int; var text: String }
        struct FetchAll: NetworkOperation {
            typealias Output = NetworkResponse
            var request: NetworkRequest { .get("timeline", query: ["limit": "200"]) }
        }
        let posts = try await controller.perform(FetchAll()).decode([Post].self)
        return Dictionary(uniqueKeysWithValues: posts.filter { texts.contains($0.text) }.map { ($0.id, $0.text) })
    }

    /// `POST /_control` on the demo server: the next `count` answers on `route` are lost.
    static func dropResponses(_ count: Int, on route: String, controller: NetworkController) async throws {
        struct Body: Encodable, Sendable { var route: String; var dropResponses: Int }
        struct Control: NetworkOperation {
            typealias Output = NetworkResponse
            var body: Body
            var request: NetworkRequest { .post("_control", json: body) }
        }
        _ = try await controller.perform(Control(body: Body(route: route, dropResponses: count)))
    }

    // MARK: Enqueue

    /// `send` returns after one transaction wrote the row, its key and the
    /// optimistic change, before any attempt: offline, all three are there.
    @Test func sendIsDurableBeforeAnyAttempt() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let id = try await outbox.send(SendPost("local-1", "hello"))

            let entries = try await outbox.entries()
            #expect(entries.map(\.id) == [id.id])
            #expect(entries.first?.idempotencyKey.isEmpty == false)
            #expect(entries.first?.lane == "posts")
            #expect(try await Self.rows(store) == [PostRow(localID: "local-1", serverID: nil, text: "hello", isPending: true)])
            _ = await controller.shutdown(grace: .zero)
            // What the grace did not send stays queued.
            #expect(try await outbox.entries().count == 1)
            await outbox.waitUntilIdle()
            try await store.close()
        }
    }

    @Test func aFailingOptimisticChangeQueuesNothing() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.controller(FixtureTransport(), baseURL: URL(string: "http://h.test")!, store: store)
            let outbox = Outbox(store: store, controller: controller, types: [Broken.self])
            let error = await #expect(throws: DepotError.self) { try await outbox.send(Broken(payload: "x")) }
            #expect(error?.code == .storage)
            #expect(try await outbox.entries().isEmpty)
            _ = await controller.shutdown(grace: .zero)
        }
    }

    @Test func anUnregisteredTypeIsRefusedInOneSentence() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.controller(FixtureTransport(), baseURL: URL(string: "http://h.test")!, store: store)
            let outbox = Outbox(store: store, controller: controller, types: [])
            let error = await #expect(throws: DepotError.self) { try await outbox.send(SendPost("a", "b")) }
            #expect("\(error.map { "\($0)" } ?? "")".contains("SendPost.v1 is not registered"))
            #expect(try await outbox.entries().isEmpty)
            #expect(try await Self.rows(store).isEmpty)
            _ = await controller.shutdown(grace: .zero)
        }
    }

    // MARK: Delivery

    /// The first answer is lost after the server stored the post; the retry
    /// carries the same key, gets the replayed answer, and commits. The
    /// server holds the post once.
    @Test func aLostAnswerIsRetriedWithTheSameKeyAndDeliveredOnce() async throws {
        try await withOnlineOutbox { server, store, controller, outbox in
            try await Self.dropResponses(1, on: "/posts", controller: controller)
            let id = try await outbox.send(SendPost("local-1", "exactly once, please"))
            let outcome = await id.outcome()
            let response = try outcome.get()
            #expect(response.status == 201)
            // The answer is the server's replay of the first attempt's:
            // the retry carried the same key.
            #expect(response.headers["Idempotent-Replayed"] == "true")
            let posts = try await Self.serverPosts(server, controller: controller, texts: ["exactly once, please"])
            #expect(posts.count == 1)
            #expect(try await Self.rows(store) == [PostRow(localID: "local-1", serverID: posts.keys.first, text: "exactly once, please", isPending: false)])
            #expect(try await outbox.entries().isEmpty)
        }
    }

    /// A 422 rolls the optimistic row back and removes the entry; the lane
    /// goes on with the next one.
    @Test func aPermanentFailureRollsBackAndTheLaneGoesOn() async throws {
        try await withOnlineOutbox { server, store, controller, outbox in
            let rejected = try await outbox.send(SendPost("local-1", "   "))
            let accepted = try await outbox.send(SendPost("local-2", "after the rejected one"))
            let failure = await rejected.outcome()
            guard case .failure(let error) = failure else {
                Issue.record("the empty post was accepted")
                return
            }
            #expect(error.status == 422)
            #expect(try await accepted.outcome().get().status == 201)
            #expect(try await Self.rows(store).map(\.localID) == ["local-2"])
            #expect(try await outbox.entries().isEmpty)
        }
    }

    /// Mutations of one lane reach the server in the order they were sent.
    @Test func oneLaneIsDeliveredInOrder() async throws {
        try await withOnlineOutbox { server, store, controller, outbox in
            let texts = (1...8).map { "in order \($0)" }
            var tickets: [OutboxTicket] = []
            for (index, text) in texts.enumerated() { tickets.append(try await outbox.send(SendPost("local-\(index)", text))) }
            for ticket in tickets { _ = try await ticket.outcome().get() }
            let posts = try await Self.serverPosts(server, controller: controller, texts: Set(texts))
            #expect(posts.sorted { $0.key < $1.key }.map(\.value) == texts)
        }
    }

    /// A mutation queued by a run that ended offline goes out when a later
    /// run starts its outbox: the store file is all they share.
    @Test func whatAnEarlierRunQueuedGoesOutOnTheNextStart() async throws {
        try await withSetup { setup in
            // Run 1: offline. The post is queued and shown as pending.
            do {
                let store = try setup.store()
                let controller = setup.offlineController(store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await outbox.send(SendPost("local-1", "written offline"))
                _ = await controller.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
                try await store.close()
            }
            // Run 2: online.
            try await DemoServer.withRunning(.init(port: 0)) { server in
                let store = try setup.store()
                #expect(try await Self.rows(store).map(\.isPending) == [true])
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                let id = try #require(try await outbox.entries().first?.id)
                try await outbox.start()
                #expect(try await outbox.outcome(of: id).get().status == 201)
                #expect(try await Self.rows(store).map(\.isPending) == [false])
                #expect(try await Self.serverPosts(server, controller: controller, texts: ["written offline"]).count == 1)
                _ = await controller.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
                try await store.close()
            }
        }
    }

    /// Closing the store while its lanes send, with no shutdown and no
    /// `waitUntilIdle()` first: the close returns, every ticket is answered
    /// (sent, or "stays queued"), and the next run sends what was left, each
    /// post once on the server and none left pending.
    @Test func closingTheStoreUnderDeliveryLosesNothing() async throws {
        let texts = (0..<20).map { "closed under delivery \($0)" }
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                // Run 1: closed while sending.
                do {
                    let store = try setup.store()
                    let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                    let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                    var tickets: [OutboxTicket] = []
                    for (index, text) in texts.enumerated() {
                        tickets.append(try await outbox.send(SendPost("local-\(index)", text)))
                    }
                    // Waiting before the close, and after it.
                    let early = Task { [tickets] in
                        await withTaskGroup(of: Result<NetworkResponse, DepotError>.self) { group in
                            for ticket in tickets.prefix(10) { group.addTask { await ticket.outcome() } }
                            return await group.reduce(into: []) { $0.append($1) }
                        }
                    }
                    let keys = tickets.prefix(10).map(\.id.rawValue)
                    while !outbox.state.withLock({ state in keys.allSatisfy { state.waiters[$0] != nil || state.outcomes[$0] != nil } }) {
                        await Task.yield()
                    }
                    try await store.close()
                    var outcomes = await early.value
                    for ticket in tickets.dropFirst(10) { outcomes.append(await ticket.outcome()) }
                    let sent = outcomes.filter { (try? $0.get()) != nil }.count
                    for case .failure(let error) in outcomes {
                        #expect(error.code == .storage && error.detail == Outbox.storeClosed.detail, "\(error)")
                    }
                    #expect(sent < texts.count, "the close came after every send: nothing was tested")
                    _ = await controller.shutdown(grace: .zero)
                }
                // Run 2: what was left goes out.
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await outbox.start()
                await outbox.waitUntilIdle()
                #expect(try await outbox.entries().isEmpty)
                #expect(try await Self.rows(store).map(\.isPending) == Array(repeating: false, count: texts.count))
                let posts = try await Self.serverPosts(server, controller: controller, texts: Set(texts))
                #expect(posts.values.sorted() == texts.sorted())
                _ = await controller.shutdown(grace: .zero)
                try await store.close()
            }
        }
    }

    /// Quitting right after sending: the grace covers every queued send of a
    /// lane, one after another, not only the one already under way.
    @Test func shutdownGivesQueuedSendsTheGrace() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                let texts = (1...3).map { "sent while quitting \($0)" }
                for (index, text) in texts.enumerated() { try await outbox.send(SendPost("local-\(index)", text)) }
                let report = await controller.shutdown(grace: .seconds(30))
                #expect(!report.graceExpired)
                #expect(try await outbox.entries().isEmpty)
                #expect(try await Self.rows(store).allSatisfy { !$0.isPending })
                await outbox.waitUntilIdle()
                let check = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                #expect(try await Self.serverPosts(server, controller: check, texts: Set(texts)).count == 3)
                _ = await check.shutdown(grace: .zero)
                try await store.close()
            }
        }
    }

    /// A lane pausing after a failure (a 503 here) does not hold the grace:
    /// shutdown ends the pause at once, and the entry stays queued.
    @Test func shutdownEndsALanesBackoffAtOnce() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let clock = ManualClock()
            let transport = FixtureTransport(["/posts": .status(503)])
            var configuration = NetworkController.Configuration(baseURL: URL(string: "http://h.test")!, transport: transport, clock: clock, notificationCenter: nil)
            configuration.store = store
            let controller = NetworkController(configuration: configuration)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let events = controller.events
            let paused = Mutex(false)
            let watcher = Task {
                for await event in events where event.outbox?.step == .willRetry {
                    paused.withLock { $0 = true }
                    return
                }
            }
            try await outbox.send(SendPost("local-1", "into a 503"))
            // The controller's own retries sleep on the clock; then the lane pauses.
            while !paused.withLock({ $0 }) {
                clock.advanceToNextDeadline()
                await Task.yield()
            }
            await watcher.value
            while clock.sleeperCount == 0 { await Task.yield() }  // the lane's pause has begun
            let pausedAt = clock.elapsed
            let quitting = Task { await controller.shutdown(grace: .seconds(60)) }
            // Without the wake-up, only the grace (60 s of this clock) would end it.
            var yields = 0
            while outbox.state.withLock({ !$0.running.isEmpty }), yields < 100_000 {
                await Task.yield()
                yields += 1
            }
            #expect(outbox.state.withLock { $0.running.isEmpty }, "the lane still pauses")
            while outbox.state.withLock({ !$0.running.isEmpty }) {  // unblock a failing run
                clock.advanceToNextDeadline()
                await Task.yield()
            }
            await outbox.waitUntilIdle()
            #expect(clock.elapsed == pausedAt, "the pause ended without time passing")
            let report = await quitting.value
            #expect(!report.graceExpired)
            #expect(try await outbox.entries().count == 1)
            try await store.close()
        }
    }

    /// A refresh that lands while a post is pending replaces the table with
    /// the server's rows; the pending post is still there afterwards (its
    /// optimistic change is applied again in the refresh's transaction), and
    /// the commit later turns it into the server's post.
    @Test func aRefreshDoesNotUndoAPendingWrite() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let offline = setup.offlineController(store: store)
            let queued = Outbox(store: store, controller: offline, types: [SendPost.self])
            let id = try await queued.send(SendPost("local-1", "pending through a refresh"))
            _ = await offline.shutdown(grace: .zero)

            try await DemoServer.withRunning(.init(port: 0)) { server in
                let online = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let refreshed = try await online.perform(RefreshPosts())
                #expect((refreshed.written ?? 0) > 0)
                let afterRefresh = try await Self.rows(store)
                #expect(afterRefresh.contains(PostRow(localID: "local-1", serverID: nil, text: "pending through a refresh", isPending: true)))
                #expect(afterRefresh.count == (refreshed.written ?? 0) + 1)

                let outbox = Outbox(store: store, controller: online, types: [SendPost.self])
                try await outbox.start()
                let answer = try await outbox.outcome(of: id.id).get()
                #expect(answer.status == 201)
                let mine = try #require(try await Self.rows(store).first { $0.localID == "local-1" })
                #expect(!mine.isPending && mine.serverID != nil)
                // Once committed, a refresh no longer applies it: the server's row is the post.
                _ = try await online.perform(RefreshPosts())
                let final = try await Self.rows(store)
                #expect(!final.contains { $0.localID == "local-1" })
                #expect(final.filter { $0.text == "pending through a refresh" }.count == 1)
                _ = await online.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
            }
            await queued.waitUntilIdle()
            try await store.close()
        }
    }

    /// A 401 holds the lane (the entry stays queued, undecided) until new
    /// credentials are in and `resumeHeld()` lets it go again: then it is sent
    /// with its key and accepted.
    @Test func a401HoldsTheLaneUntilCredentialsChange() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                final class Token: Sendable {
                    private let stored = Mutex<String?>(nil)
                    var value: String? {
                        get { stored.withLock { $0 } }
                        set { stored.withLock { $0 = newValue } }
                    }
                }
                let token = Token()
                var configuration = NetworkController.Configuration(
                    baseURL: server.baseURL, transport: AsyncHTTPClientTransport(),
                    adapters: [Credentials(for: server.baseURL) { token.value }], notificationCenter: nil)
                configuration.store = store
                let controller = NetworkController(configuration: configuration)
                let outbox = Outbox(store: store, controller: controller, types: [CreateTask.self])
                let id = try await outbox.send(CreateTask(payload: "Call Ann"))
                // Held: nothing pending is being sent, and the entry is still there.
                let held = await Self.firstSnapshot(of: outbox) { !$0.heldLanes.isEmpty }
                #expect(held?.heldLanes == ["CreateTask"] && held?.pendingCount == 1 && held?.isSending == false)
                #expect(try await outbox.entries().map(\.id) == [id.id])

                token.value = "Basic " + Data("admin:secret".utf8).base64EncodedString()
                await outbox.resumeHeld()
                #expect(try await id.outcome().get().status == 201)
                #expect(try await outbox.entries().isEmpty)
                _ = await controller.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
                try await store.close()
            }
        }
    }

    /// Rows an older version queued that the new payload type cannot decode
    /// are surfaced as failed, with the reason; the launch goes on, other
    /// entries are sent, and the app can discard the failed one.
    @Test func aPayloadThatNoLongerDecodesIsSurfacedAsFailed() async throws {
        try await withSetup { setup in
            do {
                let store = try setup.store()
                let controller = setup.offlineController(store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await outbox.send(SendPost("local-1", "queued by version 1"))
                _ = await controller.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
                try await store.close()
            }
            try await DemoServer.withRunning(.init(port: 0)) { server in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPostV2.self])
                let old = try #require(try await outbox.entries().first?.id)
                try await outbox.start()
                guard case .failure(let error) = await outbox.outcome(of: old) else {
                    Issue.record("an undecodable payload was sent")
                    return
                }
                #expect(error.code == .decoding)
                let snapshot = try #require(await Self.firstSnapshot(of: outbox) { !$0.failed.isEmpty })
                #expect(snapshot.failed.map(\.id) == [old])
                #expect(snapshot.failed.first?.lastError == "it cannot be rebuilt: its payload cannot be decoded as SendPost.v1")
                // A new mutation in the same lane is not blocked by it.
                let fresh = try await outbox.send(SendPostV2(payload: .init(localID: "local-2", body: "from version 2", visibility: "all")))
                #expect(try await fresh.outcome().get().status == 201)
                try await outbox.discard(old)
                #expect(try await outbox.entries().isEmpty)
                _ = await controller.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
                try await store.close()
            }
        }
    }

    /// Lanes run in parallel: a lane whose first mutation waits (its answers
    /// are lost, again and again) does not hold back another lane.
    @Test func aLaneThatWaitsDoesNotHoldBackTheOthers() async throws {
        struct Slow: Mutation {
            static let typeName = "Slow"
            var payload: String
            init(payload: String) { self.payload = payload }
            var lane: String { "slow" }
            var request: NetworkRequest { .post("posts", json: ["text": payload]) }
            func applyOptimistically(_ db: Database) throws {}
            func commit(_ response: NetworkResponse, _ db: Database) throws {}
            func rollback(_ error: DepotError, _ db: Database) throws {}
        }
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self, Slow.self, CreateTaskWithAuth.self])
                // Every answer on /posts is lost for a while: the slow lane keeps retrying.
                try await Self.dropResponses(1_000, on: "/posts", controller: controller)
                let slow = try await outbox.send(Slow(payload: "stuck"))
                _ = await Self.firstSnapshot(of: outbox) { $0.isSending }
                // Another lane, another route: delivered while the slow one waits.
                let task = try await outbox.send(CreateTaskWithAuth(payload: "Call Bob"))
                #expect(try await task.outcome().get().status == 201)
                #expect(try await outbox.entries().map(\.id) == [slow.id])
                _ = await controller.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
                try await store.close()
            }
        }
    }

    // MARK: Status and events

    /// Waits until a snapshot satisfies `condition` (values may be coalesced; the last one counts).
    static func firstSnapshot(of outbox: Outbox, where condition: (OutboxSnapshot) -> Bool) async -> OutboxSnapshot? {
        for await snapshot in outbox.updates() where condition(snapshot) { return snapshot }
        return nil
    }

    /// Yields the main actor until `condition` holds (or the test is cancelled):
    /// the status applies snapshots in tasks of its own there.
    @MainActor static func waitOnTheMainActor(until condition: @MainActor () -> Bool) async {
        while !condition(), !Task.isCancelled { await Task.yield() }
    }

    @Test func theStatusFollowsTheQueueAndEveryChangeIsAnEvent() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            let events = controller.events
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let status = await OutboxStatus(outbox: outbox)
            let first = try await outbox.send(SendPost("local-1", "one"))
            try await outbox.send(SendPost("local-2", "two"))
            let queued = await Self.firstSnapshot(of: outbox) { $0.pendingCount == 2 }
            #expect(queued?.failed.isEmpty == true)
            _ = await controller.shutdown(grace: .zero)  // the send waiting for the network ends; both stay queued
            try await first.cancel()
            #expect(await Self.firstSnapshot(of: outbox) { $0.pendingCount == 1 } != nil)
            // The main-actor status catches up with the last value (it has
            // been published; the status applies it on the main actor).
            await Self.waitOnTheMainActor(until: { status.pendingCount == 1 })
            #expect(await status.pendingCount == 1)
            #expect(await status.failed.isEmpty)
            // Each change was published as a controller-wide event.
            var counts: [Int] = []
            for await event in events where event.kind == .outboxChanged {
                #expect(event.isControllerWide)
                counts.append(event.outbox?.pending ?? -1)
            }
            #expect(counts.contains(2))
        }
    }

    /// Each entry's steps are controller events, in order; a ticket follows
    /// its own, and one decided already reports its final step at once.
    @Test func everyStepOfAnEntryIsAnEventAndTheTicketFollowsIt() async throws {
        try await withOnlineOutbox { _, _, controller, outbox in
            let events = controller.events
            let rejected = try await outbox.send(SendPost("local-1", ""))
            let accepted = try await outbox.send(SendPost("local-2", "fine"))
            var steps: [Int64: [String]] = [:]
            for await event in events {
                guard let change = event.outbox, let entry = change.entry, let step = change.step else { continue }
                steps[entry, default: []].append("\(step)")
                if steps[accepted.id.rawValue]?.last == "committed" { break }
            }
            #expect(steps[rejected.id.rawValue] == ["queued", "sending", "rolledBack"])
            #expect(steps[accepted.id.rawValue] == ["queued", "sending", "committed"])
            var followed: [NetworkEvent.OutboxChange.Step] = []
            for await change in accepted.changes() { followed.append(try #require(change.step)) }
            #expect(followed == [.committed])
            await #expect(throws: DepotError.self) { try await accepted.cancel() }
        }
    }

    /// A ticket taken before the send goes out sees it through to its end.
    @Test func aTicketFollowsItsEntryToTheEnd() async throws {
        try await withOnlineOutbox { _, _, controller, outbox in
            let blocker = try await outbox.send(SendPost("local-0", "first in the lane"))
            let ticket = try await outbox.send(SendPost("local-1", "second"))
            var followed: [NetworkEvent.OutboxChange.Step] = []
            for await change in ticket.changes() { followed.append(try #require(change.step)) }
            #expect(followed.last == .committed)
            #expect(Set(followed).isSubset(of: [.sending, .committed]))
            #expect(try await blocker.outcome().get().status == 201)
            _ = controller
        }
    }

    @Test func aRolledBackMutationIsListedWithItsError() async throws {
        try await withOnlineOutbox { _, _, _, outbox in
            let id = try await outbox.send(SendPost("local-1", ""))
            _ = await id.outcome()
            let snapshot = try await outbox.snapshot()
            let failure = try #require(snapshot.rolledBack.first { $0.id == id.id })
            #expect(failure.error.status == 422)
            #expect(failure.description.hasPrefix("SendPost.v1 was not accepted:"))
            #expect(snapshot.pendingCount == 0 && !snapshot.isSending)
        }
    }

    /// A queued entry that is not being sent can be discarded: its optimistic
    /// row is rolled back and its waiters hear `.cancelled`.
    @Test func discardRollsBackAQueuedEntry() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            _ = await controller.shutdown(grace: .zero)  // nothing is sent: the entry stays queued
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let id = try await outbox.send(SendPost("local-1", "never mind"))
            await outbox.waitUntilIdle()  // its one attempt met the shut-down controller
            let waiter = Task { await id.outcome() }
            try await id.cancel()
            guard case .failure(let error) = await waiter.value else {
                Issue.record("a discarded entry succeeded")
                return
            }
            #expect(error.code == .cancelled)
            #expect(try await Self.rows(store).isEmpty)
            #expect(try await outbox.entries().isEmpty)
            await #expect(throws: DepotError.self) { try await outbox.discard(id.id) }
        }
    }
}
