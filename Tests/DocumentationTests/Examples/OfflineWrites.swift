import Depot
import DepotStore
import Foundation
import GRDB

// Sources/DepotStore/DepotStore.docc/OfflineWrites.md. Its types are
// top-level: TestingYourOperations.md tests SendPost, and links there.

struct PostRow: Codable, Sendable, Identifiable, Equatable, FetchableRecord, PersistableRecord {
    var id: String          // the app's own id, made before the server knows the post
    var serverID: Int?      // the server's, once it accepted the post
    var text: String
    var isPending: Bool
}

extension DatabaseMigrator {
    static var posts: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create postRow") { db in
            try db.create(table: "postRow") { table in
                table.primaryKey("id", .text)
                table.column("serverID", .integer)
                table.column("text", .text).notNull()
                table.column("isPending", .boolean).notNull()
            }
        }
        return migrator
    }
}

struct RefreshPosts: CachingOperation {
    struct Post: Decodable, Sendable { var id: Int; var text: String }

    var request: NetworkRequest { .get("timeline") }
    var cacheKey: String { "timeline" }

    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Post] {
        try response.decode([Post].self)
    }

    func write(_ posts: [Post], to db: Database) throws -> Int {
        for post in posts {
            if var row = try PostRow.filter(Column("serverID") == post.id).fetchOne(db) {
                row.text = post.text
                try row.update(db)                     // same id: one update on screen
            } else {
                try PostRow(id: "server-\(post.id)", serverID: post.id, text: post.text, isPending: false).insert(db)
            }
        }
        // Gone from the server: delete, but never a row still waiting to be sent.
        try PostRow.filter(Column("isPending") == false && !posts.map(\.id).contains(Column("serverID"))).deleteAll(db)
        return posts.count
    }
}

/// The server's answer to `POST /posts`: `{"id": 42, "text": "hi"}`.
struct SentPost: Decodable, Sendable {
    var id: Int
    var text: String
}

struct SendPost: Mutation {
    struct Payload: Codable, Sendable {
        var localID: String
        var text: String
    }

    static let typeName = "SendPost.v1"
    var payload: Payload
    init(payload: Payload) { self.payload = payload }

    var lane: String { "posts" }
    var request: NetworkRequest { .post("posts", json: ["text": payload.text]) }

    func applyOptimistically(_ db: Database) throws {
        try PostRow(id: payload.localID, serverID: nil, text: payload.text, isPending: true).upsert(db)
    }

    func commit(_ response: NetworkResponse, _ db: Database) throws {
        let sent = try response.decode(SentPost.self)
        try PostRow(id: payload.localID, serverID: sent.id, text: sent.text, isPending: false).upsert(db)
    }

    func rollback(_ error: DepotError, _ db: Database) throws {
        _ = try PostRow.deleteOne(db, key: payload.localID)
    }
}

enum OfflineWritesExamples {
    static func sendAndFollow(store: Store, controller: NetworkController) async throws -> Result<NetworkResponse, DepotError> {
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        try await outbox.start()                                    // what earlier launches left
        let ticket = try await outbox.send(SendPost(payload: .init(localID: UUID().uuidString, text: "hi")))
        let status = await OutboxStatus(outbox: outbox)             // @Observable: pending, sending, waiting, failures
        let answer = await ticket.outcome()                         // when it matters
        _ = status
        return answer
    }

    static func exit(controller: NetworkController, store: Store) async throws {
        _ = await controller.shutdown(grace: .seconds(5))
        try await store.close()
    }
}

@MainActor
func outboxLine(_ status: OutboxStatus) -> String {
    if !status.heldLanes.isEmpty { return "sign in to send" }
    if status.isWaitingForNetwork { return "waiting for network" }
    if status.isSending { return "sending…" }
    return status.pendingCount == 0 ? "" : "\(status.pendingCount) waiting"
}
