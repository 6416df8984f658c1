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
            var configuration = NetworkController.Configuration(baseURL: baseURL, transport: transport, observability: .init(notificationCenter: nil))
            configuration.store = store
            return NetworkController(configuration: configuration)
        }
    }

    func withSetup<T>(_ body: (Setup) async throws -> T) async throws -> T {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(Setup(folder: folder))
    }

    /// What a run does at exit: shut the controller down, let the lanes stop,
    /// close the store (what is left stays queued for the next run).
    static func quit(_ controller: NetworkController, _ outbox: Outbox, closing store: Store) async throws {
        _ = await controller.shutdown(grace: .zero)
        await outbox.waitUntilIdle()
        try await store.close()
    }

    /// An outbox on a fresh store file, sending to an in-process demo server.
    func withOnlineOutbox(_ body: (DemoServer, Store, NetworkController, Outbox) async throws -> Void) async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await body(server, store, controller, outbox)
                try await Self.quit(controller, outbox, closing: store)
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
}
