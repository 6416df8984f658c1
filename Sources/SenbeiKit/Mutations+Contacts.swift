import Depot
import DepotStore
import Foundation
import GRDB

/// Creates a contact: `POST /contacts`.
///
/// The server lists new contacts first, so the cache puts it before the first
/// contact of page 1, at once, with its temporary identifier and
/// ``PendingChange/create`` (``SenbeiApp/loadPage(_:page:refresh:)`` counts
/// it in the total). Once accepted, the server's contact takes its place and
/// is counted in every cached page's total, until page 1 is fetched again.
/// A new contact has a lane of its own.
public struct CreateContact: SenbeiMutation {
    /// What is stored.
    public struct Payload: Codable, Sendable, Hashable {
        /// The temporary identifier (negative).
        public var localID: Int
        /// The contact's name.
        public var name: String
        /// The e-mail address, if any.
        public var email: String?
    }

    /// `senbei.newContact.v1`.
    public static let typeName = "senbei.newContact.v1"
    /// ``senbeiDidCreateContact``.
    public static let didCommit = Notification.Name.senbeiDidCreateContact
    /// What is stored.
    public var payload: Payload

    /// Rebuilds the change from its stored payload.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// Makes the change; `localID` is the contact's temporary identifier (negative, unique).
    public init(name: String, email: String? = nil, localID: Int) {
        self.payload = Payload(localID: localID, name: name, email: email)
    }

    public var localID: Int { payload.localID }
    /// `new contact "Zoe Quinn"`.
    public var summary: String { "new contact \"\(payload.name)\"" }
    /// Every contact page (the new one shifts the rest) and the activity stream.
    public var invalidates: [CacheInvalidation] { [.tag(EntityKind.contacts.rawValue), .key(FetchActivities().cacheKey)] }
    /// A lane of its own: a new record.
    public var lane: String { "senbei.contact.new\(payload.localID)" }

    /// `POST contacts` with `name` and `email`.
    public var request: NetworkRequest {
        NetworkRequest(method: .post, target: .path("contacts"), body: .json(Wire.NewContact(name: payload.name, email: payload.email), encoder: Wire.encoder))
    }

    /// The contact, pending, before the first of page 1 (or where it already is).
    public func applyOptimistically(_ db: Database) throws {
        let key: [String: any DatabaseValueConvertible] = ["kind": EntityKind.contacts.rawValue, "id": payload.localID]
        let position = try Entity.fetchOne(db, key: key)?.position ?? Self.topOfPageOne(db)
        try Entity(kind: .contacts, id: payload.localID, name: payload.name, email: payload.email, page: 1, position: position, pending: .create).upsert(db)
    }

    /// The server's contact takes the temporary one's place, and is counted
    /// unless a refresh already brought it.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        let wire = try Wire.decode(Wire.Entity.self, from: response)
        let contacts = EntityKind.contacts.rawValue
        let temporary = try Entity.fetchOne(db, key: ["kind": contacts, "id": payload.localID])
        _ = try Entity.deleteOne(db, key: ["kind": contacts, "id": payload.localID])
        let listed = try Entity.fetchOne(db, key: ["kind": contacts, "id": wire.id])
        let page = listed?.page ?? temporary?.page ?? 1
        let position = try listed?.position ?? temporary?.position ?? Self.topOfPageOne(db)
        try Entity(kind: .contacts, id: wire.id, name: wire.name, email: wire.email, company: wire.company, page: page, position: position).upsert(db)
        if listed == nil {
            try db.execute(sql: "UPDATE entityPage SET total = total + 1 WHERE kind = ?", arguments: [contacts])
        }
    }

    /// The temporary contact goes; the refusal is kept.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        _ = try Entity.deleteOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": payload.localID])
        try reject(error, db)
    }

    /// The contact as cached.
    public func record(from response: NetworkResponse, _ db: Database) throws -> Entity {
        let wire = try Wire.decode(Wire.Entity.self, from: response)
        return try Entity.fetchOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": wire.id])
            ?? Entity(kind: .contacts, id: wire.id, name: wire.name, email: wire.email, company: wire.company)
    }

    /// The contact's identifier.
    public func entity(of record: Entity) -> any Sendable { record.id }

    /// Before the first contact of page 1.
    static func topOfPageOne(_ db: Database) throws -> Int {
        (try Int.fetchOne(db, sql: "SELECT MIN(position) FROM entity WHERE kind = ? AND page = 1", arguments: [EntityKind.contacts.rawValue]) ?? 0) - 1
    }
}
