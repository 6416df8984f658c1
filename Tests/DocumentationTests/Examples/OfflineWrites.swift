import Depot
import DepotStore
import Foundation
import GRDB

// Sources/DepotStore/DepotStore.docc/OfflineWrites.md. Its types are
// top-level: TestingYourOperations.md tests SendPost, and links there.
// The versioned contacts build on CachedContact (YourFirstCachedList.swift),
// the article this one links to.

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

// MARK: - Versions and conflicts

/// A contact as the server sends it, from `GET`, `PUT` and a `412`:
/// `{"id": 7, "version": 3, "name": "Ann", "email": "ann@example.com"}`.
struct ServerContact: Decodable, Sendable {
    var id: Int
    var version: Int
    var name: String
    var email: String?
}

struct RefreshContact: CachingOperation {
    var id: Int

    var request: NetworkRequest { .get("contacts/\(id)") }
    var cacheKey: String { "contact \(id)" }

    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> ServerContact {
        try response.decode(ServerContact.self)
    }

    func write(_ contact: ServerContact, to db: Database) throws -> Int {
        // Older than the cache's version: the cached row stays as it is.
        guard try RecordVersions.admit(RecordVersion(contact.version), for: RecordKey("contact", contact.id), in: db) else { return 0 }
        try CachedContact(id: contact.id, name: contact.name, email: contact.email).upsert(db)
        return 1
    }
}

struct EditContact: VersionedEdit {
    struct Fields: Codable, Sendable, Equatable {
        var name: String
        var email: String?
    }

    struct Payload: Codable, Sendable {
        var id: Int
        var version: RecordVersion
        var base: Fields
        var mine: Fields
    }

    static let typeName = "EditContact.v1"
    var payload: Payload
    init(payload: Payload) { self.payload = payload }

    var lane: String { "contact \(payload.id)" }
    var record: RecordKey? { RecordKey("contact", payload.id) }
    var baseVersion: RecordVersion? { payload.version }
    var base: Fields { payload.base }
    var mine: Fields { payload.mine }
    var request: NetworkRequest { .put("contacts/\(payload.id)", json: payload.mine) }
    var currentRequest: NetworkRequest { .get("contacts/\(payload.id)") }

    func rebased(onto version: RecordVersion, base: Fields, mine: Fields) -> EditContact {
        EditContact(payload: Payload(id: payload.id, version: version, base: base, mine: mine))
    }

    func serverRecord(from response: NetworkResponse) throws -> ServerRecord<Fields> {
        let contact = try response.decode(ServerContact.self)
        return ServerRecord(version: RecordVersion(contact.version), fields: Fields(name: contact.name, email: contact.email))
    }

    func applyOptimistically(_ db: Database) throws {
        try show(payload.mine, db)
    }

    func commit(_ response: NetworkResponse, _ db: Database) throws {
        try write(serverRecord(from: response), db)
    }

    func rollback(_ error: DepotError, _ db: Database) throws {
        try show(payload.base, db)
    }

    /// The server's record (`nil`: deleted there), unless the cache holds a newer version.
    func write(_ theirs: ServerRecord<Fields>?, _ db: Database) throws {
        let key = RecordKey("contact", payload.id)
        guard let theirs else {
            try RecordVersions.forget(key, in: db)
            _ = try CachedContact.deleteOne(db, key: payload.id)
            return
        }
        if try RecordVersions.admit(theirs.version, for: key, in: db) {
            try show(theirs.fields, db)
        }
    }

    private func show(_ fields: Fields, _ db: Database) throws {
        try CachedContact(id: payload.id, name: fields.name, email: fields.email).upsert(db)
    }
}

struct ContactListRow: FetchableRecord, Sendable {
    var contact: CachedContact
    var state: RecordState

    init(row: Row) throws {
        contact = try CachedContact(row: row)
        state = RecordState(row: row)
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

    static func sendEdit(store: Store, outbox: Outbox) async throws {
        let edit = try await store.read { db -> EditContact? in
            guard let contact = try CachedContact.fetchOne(db, key: 7),
                  let version = try RecordVersions.version(of: RecordKey("contact", 7), in: db)
            else { return nil }                                     // not cached with a version: fetch it first
            let base = EditContact.Fields(name: contact.name, email: contact.email)
            var mine = base
            mine.email = "ann@example.org"
            return EditContact(payload: .init(id: 7, version: version, base: base, mine: mine))
        }
        if let edit { _ = try await outbox.send(edit) }
    }

    static func listConflicts(outbox: Outbox) async throws {
        for conflict in try await outbox.conflicts() {
            print(conflict)                                         // #3 contact #7: email: a@x → b@x | c@x
        }
    }

    static func keepMine(_ conflict: OutboxConflict, outbox: Outbox) async throws {
        try await outbox.resolveConflict(conflict.id, keeping: .mine)    // or .theirs
    }

    static func chooseValue(_ conflict: OutboxConflict, outbox: Outbox) async throws {
        var fields = try conflict.keepingMine(as: EditContact.Fields.self)
        fields.email = "ann@example.org"                            // what the user chose
        try await outbox.resolveConflict(conflict.id, with: fields)
    }

    static func contactsWithState() -> QueryInterfaceRequest<ContactListRow> {
        let request = CachedContact.all()
            .annotated(with: RecordState.columns(kind: "contact", id: Column("id")))
            .asRequest(of: ContactListRow.self)
        return request
    }
}

@MainActor
func outboxLine(_ status: OutboxStatus) -> String {
    if !status.heldLanes.isEmpty { return "sign in to send" }
    if status.isWaitingForNetwork { return "waiting for network" }
    if status.isSending { return "sending…" }
    return status.pendingCount == 0 ? "" : "\(status.pendingCount) waiting"
}
