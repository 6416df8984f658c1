import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing

/// Random interleavings of sends, lost answers, refusals, offline spells,
/// refreshes and reopenings of the store (a crash), against depot-server over
/// real HTTP with a real store file. After every refresh the rows on screen
/// are the server's rows plus the pending optimistic ones; at the end every
/// mutation was decided exactly once (committed or rolled back) and the
/// server holds each accepted post once.
@Suite(.timeLimit(.minutes(5)))
struct OutboxModelTests {
    /// A post as shown: pending until the server gave it an id.
    struct Row: Codable, FetchableRecord, PersistableRecord, Sendable {
        static let databaseTableName = "modelPost"
        var localID: String
        var serverID: Int?
        var text: String
        var isPending: Bool
    }

    /// Every decision is logged in the transaction that makes it; the
    /// primary key turns a second decision of one mutation into an error.
    struct Post: Mutation {
        struct Payload: Codable, Sendable { var localID: String; var text: String }
        static let typeName = "ModelPost"
        var payload: Payload
        init(payload: Payload) { self.payload = payload }

        var lane: String { "posts" }
        var request: NetworkRequest { .post("posts", json: ["text": payload.text, "author": "model"]) }

        func applyOptimistically(_ db: Database) throws {
            try db.execute(sql: "INSERT INTO modelPost (localID, text, isPending) VALUES (?, ?, 1) ON CONFLICT DO NOTHING",
                           arguments: [payload.localID, payload.text])
        }

        func commit(_ response: NetworkResponse, _ db: Database) throws {
            struct Created: Decodable { var id: Int }
            let id = try response.decode(Created.self).id
            try db.execute(sql: "INSERT INTO decision (localID, kind) VALUES (?, 'committed')", arguments: [payload.localID])
            // A refresh may have brought the server's row already (its answer was lost): one row per post.
            try db.execute(sql: "DELETE FROM modelPost WHERE serverID = ? AND localID != ?", arguments: [id, payload.localID])
            try db.execute(sql: "UPDATE modelPost SET serverID = ?, isPending = 0 WHERE localID = ?", arguments: [id, payload.localID])
        }

        func rollback(_ error: DepotError, _ db: Database) throws {
            try db.execute(sql: "INSERT INTO decision (localID, kind) VALUES (?, 'rolledBack')", arguments: [payload.localID])
            try db.execute(sql: "DELETE FROM modelPost WHERE localID = ?", arguments: [payload.localID])
        }
    }

    /// The server's posts by `model` replace the table (the pending ones
    /// come back through the outbox, in the same transaction).
    struct Refresh: CachingOperation {
        struct Sent: Decodable, Sendable { var id: Int; var author: String; var text: String }
        var request: NetworkRequest { .get("timeline", query: ["limit": "200"]) }
        var cacheKey: String { "modelPosts" }
        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Sent] {
            try response.decode([Sent].self).filter { $0.author == "model" }
        }
        func write(_ posts: [Sent], to db: Database) throws -> Int {
            try db.execute(sql: "DELETE FROM modelPost")
            for post in posts {
                try Row(localID: "server-\(post.id)", serverID: post.id, text: post.text, isPending: false).insert(db)
            }
            return posts.count
        }
    }

    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("model") { db in
            try db.create(table: "modelPost") { table in
                table.primaryKey("localID", .text)
                table.column("serverID", .integer)
                table.column("text", .text).notNull()
                table.column("isPending", .boolean).notNull()
            }
            try db.create(table: "decision") { table in
                table.primaryKey("localID", .text)
                table.column("kind", .text).notNull()
            }
        }
        return migrator
    }()

    /// One run of the app: a store, a controller on AsyncHTTPClient with a
    /// switch (offline, every request fails as with no network), an outbox.
    struct Session {
        let store: Store
        let transport: ScriptedTransport
        let controller: NetworkController
        let outbox: Outbox

        init(path: String, server: DemoServer, offline: Bool) throws {
            store = try Store(path: path, migrator: OutboxModelTests.migrator)
            transport = ScriptedTransport(forwardingTo: AsyncHTTPClientTransport())
            transport.isOffline = offline
            var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: transport, observability: .init(notificationCenter: nil))
            configuration.store = store
            configuration.environment.seed = 1
            controller = NetworkController(configuration: configuration)
            // A lane stops at the first attempt without an answer: the model
            // decides when the network comes back.
            outbox = Outbox(store: store, controller: controller, types: [Post.self], waitsForNetwork: false)
        }

        /// A crash as far as the store can tell: no grace, nothing waited for but the loops.
        func end() async throws {
            _ = await controller.shutdown(grace: .zero)
            await outbox.waitUntilIdle()
            try await store.close()
        }
    }

    /// `POST /_control` on the server, outside the session's transport.
    static func control(_ server: DemoServer, _ json: String) async throws {
        let transport = AsyncHTTPClientTransport()
        let url = server.baseURL.appending(path: "_control")
        let response = try await transport.send(TransportRequest(url: url, method: .post, headers: ["Content-Type": "application/json"], body: Data(json.utf8), timeout: .seconds(10)))
        for try await _ in response.body {}
        await transport.shutdown()
        #expect(response.status == 200)
    }

    static func serverTexts(_ server: DemoServer) async throws -> [String] {
        struct Sent: Decodable { var author: String; var text: String }
        let transport = AsyncHTTPClientTransport()
        let url = server.baseURL.appending(path: "timeline").appending(queryItems: [URLQueryItem(name: "limit", value: "200")])
        let response = try await transport.send(TransportRequest(url: url, method: .get, headers: [:], body: nil, timeout: .seconds(10)))
        var body = Data()
        for try await chunk in response.body { body.append(chunk) }
        await transport.shutdown()
        return try JSONDecoder().decode([Sent].self, from: body).filter { $0.author == "model" }.map(\.text)
    }

    /// The texts of the mutations still queued.
    static func pendingTexts(_ store: Store) async throws -> [String] {
        let payloads = try await store.read { db in try Data.fetchAll(db, sql: "SELECT payload FROM depotOutbox ORDER BY id") }
        return try payloads.map { try JSONDecoder().decode(Post.Payload.self, from: $0).text }
    }

    @Test(arguments: [11, 12, 13] as [UInt64])
    func randomInterleavingsKeepEveryPromise(seed: UInt64) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "outbox-model-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "app.sqlite").path
        var random = SeededGenerator(seed: seed)
        try await DemoServer.withRunning(.init(port: 0)) { server in
            var offline = false
            var session = try Session(path: path, server: server, offline: offline)
            var sent: [String: String] = [:]   // localID → text
            var refused: Set<String> = []      // localIDs sent with a text the server refuses
            var refreshes = 0
            var refreshedWhilePending = 0
            var crashes = 0
            for step in 0..<60 {
                let roll = Int.random(in: 0..<100, using: &random)
                let context = "seed \(seed), step \(step)"
                switch roll {
                case 0..<28:
                    let localID = "m\(step)"
                    let text = "model \(seed)-\(step)"
                    sent[localID] = text
                    try await session.outbox.send(Post(payload: .init(localID: localID, text: text)))
                case 28..<34:
                    // The server refuses an empty post with a 422: rolled back.
                    let localID = "m\(step)"
                    sent[localID] = ""
                    refused.insert(localID)
                    try await session.outbox.send(Post(payload: .init(localID: localID, text: "")))
                case 34..<40:
                    // The next answers on /posts are lost after the server acted.
                    try await Self.control(server, #"{"route": "/posts", "dropResponses": \#(Int.random(in: 1...2, using: &random))}"#)
                case 40..<46:
                    // Posts fail with 503 (reads still work): sends stay queued.
                    try await Self.control(server, #"{"route": "/posts", "failRate": 1}"#)
                case 46..<52:
                    try await Self.control(server, #"{"route": "/posts", "failRate": 0}"#)
                case 52..<58:
                    offline = true
                    session.transport.isOffline = true
                case 58..<64:
                    // The network is back; the outbox hears of it only at the next start or send.
                    offline = false
                    session.transport.isOffline = false
                case 64..<70:
                    try await session.outbox.start()
                case 70..<84 where !offline:
                    // A refresh while mutations wait, then the model's check.
                    await session.outbox.waitUntilIdle()
                    _ = try await session.controller.perform(Refresh())
                    refreshes += 1
                    let pending = try await Self.pendingTexts(session.store)
                    refreshedWhilePending += pending.isEmpty ? 0 : 1
                    // The counts kept in memory agree with the table.
                    #expect(try await session.outbox.snapshot().pendingCount == pending.count, "\(context)")
                    let shown = try await session.store.read { db in try String.fetchAll(db, sql: "SELECT text FROM modelPost") }
                    let expected = try await Self.serverTexts(server) + pending
                    #expect(shown.sorted() == expected.sorted(), "\(context): shown \(shown.sorted()), server + pending \(expected.sorted())")
                case 84..<90:
                    // A crash: the store is reopened by a new session, which starts the outbox.
                    try await session.end()
                    session = try Session(path: path, server: server, offline: offline)
                    try await session.outbox.start()
                    crashes += 1
                default:
                    await session.outbox.waitUntilIdle()
                }
            }
            // The network comes back for good; everything is decided.
            session.transport.isOffline = false
            try await Self.control(server, #"{"route": "/posts", "failRate": 0}"#)
            try await session.outbox.start()
            await session.outbox.waitUntilIdle()
            // Lost answers may stop a lane once more (the controller's retries
            // are bounded): start again until the queue is empty.
            for _ in 0..<5 {
                guard try await !session.outbox.entries().isEmpty else { break }
                try await session.outbox.start()
                await session.outbox.waitUntilIdle()
            }
            #expect(try await session.outbox.entries().isEmpty, "seed \(seed)")
            let decisions = try await session.store.read { db in
                try Row.fetchAll(db, sql: "SELECT localID, kind AS text, NULL AS serverID, 0 AS isPending FROM decision")
            }
            let decided = Dictionary(uniqueKeysWithValues: decisions.map { ($0.localID, $0.text) })
            #expect(Set(decided.keys) == Set(sent.keys), "seed \(seed): every mutation decided once")
            for (localID, kind) in decided {
                #expect(kind == (refused.contains(localID) ? "rolledBack" : "committed"), "seed \(seed): \(localID) \(kind)")
            }
            let accepted = sent.filter { !refused.contains($0.key) }.map(\.value)
            #expect(try await Self.serverTexts(server).sorted() == accepted.sorted(), "seed \(seed): each accepted post once on the server")
            // A last refresh: the screen is the server's posts, each once.
            _ = try await session.controller.perform(Refresh())
            let shown = try await session.store.read { db in try String.fetchAll(db, sql: "SELECT text FROM modelPost") }
            #expect(shown.sorted() == accepted.sorted(), "seed \(seed)")
            _ = await session.controller.shutdown(grace: .zero)
            await session.outbox.waitUntilIdle()
            try await session.store.close()
            #expect(crashes > 0 && refreshedWhilePending > 0, "seed \(seed): \(crashes) crashes, \(refreshedWhilePending) refreshes while mutations waited")
            print("outbox model, seed \(seed): \(sent.count) sent, \(refused.count) refused, \(refreshes) refreshes (\(refreshedWhilePending) while mutations waited), \(crashes) crashes")
        }
    }
}
