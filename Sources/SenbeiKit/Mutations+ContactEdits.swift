import Depot
import DepotStore
import Foundation
import GRDB

/// A contact's fields that an edit can change: what ``EditContact`` merges,
/// field by field, with another writer's change.
public struct ContactFields: Codable, Sendable, Hashable {
    /// The name (never blank).
    public var name: String
    /// The e-mail address.
    public var email: String?
    /// The company.
    public var company: String?
    /// The phone number.
    public var phone: String?

    /// The fields the server and ``senbei edit-contact`` name: `name`, `email`, `company`, `phone`.
    public static let names = ["name", "email", "company", "phone"]

    /// Makes fields.
    public init(name: String, email: String? = nil, company: String? = nil, phone: String? = nil) {
        self.name = name
        self.email = email
        self.company = company
        self.phone = phone
    }

    /// The fields of a cached contact.
    public init(_ contact: Entity) {
        self.init(name: contact.name, email: contact.email, company: contact.company, phone: contact.phone)
    }

    /// A copy with `field` set to `value` (`nil` clears it).
    /// - Throws: `.invalidRequest` for a field that is not one of ``names``,
    ///   or a `nil` name.
    public func setting(_ field: String, to value: String?) throws(DepotError) -> ContactFields {
        var copy = self
        switch field {
        case "name":
            guard let value else { throw DepotError(.invalidRequest, detail: "a contact's name cannot be cleared") }
            copy.name = value
        case "email": copy.email = value
        case "company": copy.company = value
        case "phone": copy.phone = value
        default: throw DepotError(.invalidRequest, detail: "\(field) is not a contact field (\(Self.names.joined(separator: ", ")))")
        }
        return copy
    }

    /// The fields that differ from `base`, with their new values (`nil`
    /// clears): the body of `PATCH /contacts/:id`.
    func changes(from base: ContactFields) -> [String: String?] {
        var changes: [String: String?] = [:]
        if name != base.name { changes["name"] = .some(name) }
        if email != base.email { changes["email"] = .some(email) }
        if company != base.company { changes["company"] = .some(company) }
        if phone != base.phone { changes["phone"] = .some(phone) }
        return changes
    }

    /// Writes into the cached contact `id` (if it is cached) the fields in
    /// which `self` differs from `other`, with `self`'s values: an edit's own
    /// fields and no others, so that a field it did not change keeps what a
    /// refresh brought.
    func writeChanges(from other: ContactFields, toContact id: Int, _ db: Database) throws {
        let changes = changes(from: other)
        guard !changes.isEmpty else { return }
        let columns = changes.keys.sorted()
        try db.execute(
            sql: "UPDATE entity SET \(columns.map { "\($0) = ?" }.joined(separator: ", ")) WHERE kind = ? AND id = ?",
            arguments: StatementArguments(columns.map { changes[$0] ?? nil } as [(any DatabaseValueConvertible)?]) + [EntityKind.contacts.rawValue, id])
    }

    /// Writes these fields into the cached contact `id`, if it is cached.
    func write(toContact id: Int, version: Int?, _ db: Database) throws {
        try db.execute(
            sql: "UPDATE entity SET name = ?, email = ?, company = ?, phone = ?, version = COALESCE(?, version) WHERE kind = ? AND id = ?",
            arguments: [name, email, company, phone, version, EntityKind.contacts.rawValue, id])
    }
}

extension Entity {
    /// The outbox's and the version table's name for contact `id`: `contact #id`.
    public static func contactKey(_ id: Int) -> RecordKey { RecordKey("contact", id) }

    /// Keeps this copy's version as the contact's, even if an older one than
    /// the kept one: for a copy written where no row of the newer version is.
    func replaceVersion(_ db: Database) throws {
        guard kind == .contacts, let version else { return }
        try RecordVersions.forget(Self.contactKey(id), in: db)
        try RecordVersions.admit(RecordVersion(version), for: Self.contactKey(id), in: db)
    }

    /// Whether this copy of a contact may be written over the cached one:
    /// not if the cache holds a newer version. Keeps its version if so.
    /// Records of other kinds have no versions, and always may.
    func admitVersion(_ db: Database) throws -> Bool {
        guard kind == .contacts, let version else { return true }
        return try RecordVersions.admit(RecordVersion(version), for: Self.contactKey(id), in: db)
    }
}

/// Edits a contact: `PATCH /contacts/:id` with the changed fields and
/// `If-Match` the version the cache held.
///
/// A ``DepotStore/VersionedEdit``: if someone else changed the contact
/// first, the server answers `412` with the contact as it is now, and the
/// outbox merges field by field. Changes to different fields are both kept,
/// without asking; a field both changed to different values becomes a
/// conflict kept for the user (`senbei conflicts`), with both values; a
/// contact deleted on the server becomes a conflict that says so.
///
/// Edits of one contact share its lane (with ``DeleteContact``), so they go
/// in the order they were made.
public struct EditContact: SenbeiMutation, VersionedEdit {
    /// What is stored.
    public struct Payload: Codable, Sendable, Hashable {
        /// The change's own number (see ``SenbeiMutation/localID``).
        public var localID: Int
        /// The contact.
        public var id: Int
        /// The version the edit is based on.
        public var version: RecordVersion
        /// The fields at that version.
        public var base: ContactFields
        /// The fields as the user wants them.
        public var mine: ContactFields
    }

    /// `senbei.editContact.v1`.
    public static let typeName = "senbei.editContact.v1"
    /// ``senbeiDidEditContact``.
    public static let didCommit = Notification.Name.senbeiDidEditContact
    /// What is stored.
    public var payload: Payload

    /// Rebuilds the change from its stored payload.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// Makes the edit of contact `id` from `base` at `version` to `mine`.
    public init(id: Int, version: RecordVersion, base: ContactFields, mine: ContactFields, localID: Int) {
        self.payload = Payload(localID: localID, id: id, version: version, base: base, mine: mine)
    }

    public var localID: Int { payload.localID }
    /// `edit of contact #3`.
    public var summary: String { "edit of contact #\(payload.id)" }
    /// The contact's lane.
    public var lane: String { "senbei.contact.\(payload.id)" }
    /// `contact #id`.
    public var record: RecordKey? { Entity.contactKey(payload.id) }
    /// The version the edit read.
    public var baseVersion: RecordVersion? { payload.version }
    public var base: ContactFields { payload.base }
    public var mine: ContactFields { payload.mine }

    /// `PATCH contacts/:id` with the fields that changed (`null` clears one);
    /// every field when none did (an edit the user resolved to values the
    /// server has already: the server takes it as a new version).
    public var request: NetworkRequest {
        var changes = payload.mine.changes(from: payload.base)
        if changes.isEmpty {
            let all: [String: String?] = ["name": payload.mine.name, "email": payload.mine.email, "company": payload.mine.company, "phone": payload.mine.phone]
            changes = all
        }
        let body = (try? JSONSerialization.data(withJSONObject: changes.mapValues { $0 ?? NSNull() as Any }, options: [.sortedKeys])) ?? Data("{}".utf8)
        return NetworkRequest(method: .patch, target: .path("contacts/\(payload.id)"), body: .data(body, contentType: "application/json"))
    }

    /// `GET contacts/:id`.
    public var currentRequest: NetworkRequest { .get("contacts/\(payload.id)") }

    /// The same edit from `version`.
    public func rebased(onto version: RecordVersion, base: ContactFields, mine: ContactFields) -> EditContact {
        EditContact(id: payload.id, version: version, base: base, mine: mine, localID: payload.localID)
    }

    /// The contact in a `412`'s, a `GET`'s or the edit's own answer.
    public func serverRecord(from response: NetworkResponse) throws -> ServerRecord<ContactFields> {
        let wire = try Wire.decode(Wire.Entity.self, from: response)
        guard let version = wire.version else { throw DepotError(.decoding, operation: Self.operationName, detail: "the contact has no version") }
        return ServerRecord(version: RecordVersion(version), fields: ContactFields(name: wire.name, email: wire.email, company: wire.company, phone: wire.phone))
    }

    /// The cached contact shows the fields the user changed at once (the
    /// others stay as the cache has them).
    public func applyOptimistically(_ db: Database) throws {
        try payload.mine.writeChanges(from: payload.base, toContact: payload.id, db)
    }

    /// The server's contact (its new version) replaces the cached one.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        try write(serverRecord(from: response), db)
    }

    /// The fields the edit changed get the values it was based on back; the
    /// refusal is kept.
    ///
    /// If the cache has moved on to another version since (a refresh came
    /// while the edit waited), those fields are not that version's: the
    /// cache forgets which version it holds, so that the next edit reads the
    /// contact again rather than start from them, and the lists refresh.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        try payload.base.writeChanges(from: payload.mine, toContact: payload.id, db)
        let key = Entity.contactKey(payload.id)
        if try RecordVersions.version(of: key, in: db) != payload.version {
            try RecordVersions.forget(key, in: db)
            try db.execute(sql: "UPDATE entity SET version = NULL WHERE kind = ? AND id = ?", arguments: [EntityKind.contacts.rawValue, payload.id])
            _ = try SyncLedger.invalidate([.tag(EntityKind.contacts.rawValue)], in: db)
        }
        try reject(error, db)
    }

    /// The server's contact, unless the cache holds a newer version; a
    /// contact deleted there goes from the cache too.
    public func write(_ theirs: ServerRecord<ContactFields>?, _ db: Database) throws {
        guard let theirs else {
            try Self.remove(contact: payload.id, db)
            return
        }
        guard try RecordVersions.admit(theirs.version, for: Entity.contactKey(payload.id), in: db) else { return }
        try theirs.fields.write(toContact: payload.id, version: theirs.version.counter.map { Int($0) }, db)
    }

    /// Removes the cached contact `id` and its version; the lists count one fewer.
    static func remove(contact id: Int, _ db: Database) throws {
        try RecordVersions.forget(Entity.contactKey(id), in: db)
        if try Entity.deleteOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": id]) {
            try db.execute(sql: "UPDATE entityPage SET total = MAX(0, total - 1) WHERE kind = ?", arguments: [EntityKind.contacts.rawValue])
        }
    }

    /// The contact as cached.
    public func record(from response: NetworkResponse, _ db: Database) throws -> Entity {
        let wire = try Wire.decode(Wire.Entity.self, from: response)
        return try Entity.fetchOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": wire.id]) ?? wire.contact
    }

    /// The contact's identifier.
    public func entity(of record: Entity) -> any Sendable { record.id }
}

/// Deletes a contact: `DELETE /contacts/:id` with `If-Match` the version the
/// cache held.
///
/// The contact shows as being deleted (``PendingChange/delete``) until the
/// server agrees. If someone changed it first (`412`), the delete is given
/// up rather than lose their change: the contact comes back as the server
/// has it, and the refusal says why. A contact already gone (`404`) is gone
/// here too.
public struct DeleteContact: SenbeiMutation, VersionedEdit {
    /// What is stored.
    public struct Payload: Codable, Sendable, Hashable {
        /// The change's own number (see ``SenbeiMutation/localID``).
        public var localID: Int
        /// The contact.
        public var id: Int
        /// The version deleted.
        public var version: RecordVersion
        /// Its fields, to show if the delete is given up.
        public var fields: ContactFields
    }

    /// `senbei.deleteContact.v1`.
    public static let typeName = "senbei.deleteContact.v1"
    /// ``senbeiDidDeleteContact``.
    public static let didCommit = Notification.Name.senbeiDidDeleteContact
    /// What is stored.
    public var payload: Payload

    /// Rebuilds the change from its stored payload.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// Makes the deletion of contact `id` at `version`.
    public init(id: Int, version: RecordVersion, fields: ContactFields, localID: Int) {
        self.payload = Payload(localID: localID, id: id, version: version, fields: fields)
    }

    public var localID: Int { payload.localID }
    /// `deleting contact #3`.
    public var summary: String { "deleting contact #\(payload.id)" }
    /// The contact's lane: after its edits.
    public var lane: String { "senbei.contact.\(payload.id)" }
    /// `contact #id`.
    public var record: RecordKey? { Entity.contactKey(payload.id) }
    /// The version deleted.
    public var baseVersion: RecordVersion? { payload.version }
    public var base: ContactFields { payload.fields }
    public var mine: ContactFields { payload.fields }
    /// Every contact page (the rest shift up) and the activity stream.
    public var invalidates: [CacheInvalidation] { [.tag(EntityKind.contacts.rawValue), .key(FetchActivities().cacheKey)] }

    /// `DELETE contacts/:id`.
    public var request: NetworkRequest { NetworkRequest(method: .delete, target: .path("contacts/\(payload.id)")) }
    /// `GET contacts/:id`.
    public var currentRequest: NetworkRequest { .get("contacts/\(payload.id)") }

    /// The same deletion of a later version (after the user's own edit).
    public func rebased(onto version: RecordVersion, base: ContactFields, mine: ContactFields) -> DeleteContact {
        DeleteContact(id: payload.id, version: version, fields: base, localID: payload.localID)
    }

    /// The contact in a `412`'s or a `GET`'s answer.
    public func serverRecord(from response: NetworkResponse) throws -> ServerRecord<ContactFields> {
        try EditContact(id: payload.id, version: payload.version, base: payload.fields, mine: payload.fields, localID: payload.localID).serverRecord(from: response)
    }

    /// Only a `412` is a conflict: a contact already gone (404, 410) is what
    /// the deletion wanted, and ``rollback(_:_:)`` removes it here too.
    public func conflict(in response: NetworkResponse) -> EditConflictKind? {
        response.status == 412 ? .changed : nil
    }

    /// Someone changed it first: their contact stands.
    public func resolve(_ conflict: EditConflict<ContactFields>) -> ConflictResolution<ContactFields> { .acceptServer }

    /// A `404`: already deleted, in a sentence that says so.
    public func error(for response: NetworkResponse) -> DepotError {
        guard response.status == 404 || response.status == 410 else { return DepotError.forStatus(response.status, body: response.body, operation: Self.operationName) }
        return DepotError(.notFound, operation: Self.operationName, status: response.status, detail: "contact #\(payload.id) was already deleted on the server")
    }

    /// Marked as being deleted.
    public func applyOptimistically(_ db: Database) throws {
        try db.execute(sql: "UPDATE entity SET pending = ? WHERE kind = ? AND id = ?", arguments: [PendingChange.delete, EntityKind.contacts.rawValue, payload.id])
    }

    /// Gone, with its version.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        try EditContact.remove(contact: payload.id, db)
    }

    /// The mark goes and the refusal is kept (a contact changed on the
    /// server says so); a contact already gone goes here too, without one.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        if error.code == .notFound {
            try EditContact.remove(contact: payload.id, db)
            return
        }
        try db.execute(
            sql: "UPDATE entity SET pending = NULL WHERE kind = ? AND id = ? AND pending = ?", arguments: [EntityKind.contacts.rawValue, payload.id, PendingChange.delete])
        if error.code == .conflict {
            try RejectedChange(id: localID, summary: summary, reason: "it was changed on the server since you read it, so it was kept").upsert(db)
        } else {
            try reject(error, db)
        }
    }

    /// The server's contact, or none.
    public func write(_ theirs: ServerRecord<ContactFields>?, _ db: Database) throws {
        try EditContact(id: payload.id, version: payload.version, base: payload.fields, mine: payload.fields, localID: payload.localID).write(theirs, db)
    }

    /// The contact's identifier.
    public func record(from response: NetworkResponse, _ db: Database) throws -> Int { payload.id }

    /// The contact's identifier.
    public func entity(of record: Int) -> any Sendable { record }
}

/// Fetches one contact, with its version: `GET /contacts/:id`, written into
/// the cache unless it holds a newer version. What an edit of a contact the
/// cache does not know starts from.
public struct FetchContact: NetworkOperation {
    /// The contact.
    public let id: Int

    /// Makes the operation for contact `id`.
    public init(id: Int) {
        self.id = id
    }

    /// `GET contacts/:id`.
    public var request: NetworkRequest { .get("contacts/\(id)") }
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }
    /// `.failFast`: someone waits for it.
    public var offlineBehavior: OfflineBehavior { .failFast }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name)
    }

    /// Writes the contact into the cache (page and place as cached, or none) and returns it.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> Entity {
        let wire = try Wire.decode(Wire.Entity.self, from: response)
        let id = id
        return try await context.requireStore(for: name).write { db in
            var contact = wire.contact
            if let cached = try Entity.fetchOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": id]) {
                guard try contact.admitVersion(db) else { return cached }
                (contact.page, contact.position, contact.pending) = (cached.page, cached.position, cached.pending)
            } else if try !contact.admitVersion(db) {
                // A newer version is known, but not its row: this copy and
                // its version go in together.
                try contact.replaceVersion(db)
            }
            try contact.upsert(db)
            return contact
        }
    }
}
