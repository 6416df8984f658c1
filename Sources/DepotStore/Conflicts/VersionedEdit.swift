import Depot
import Foundation
import GRDB

/// A mutation that edits an existing record from a version it read, and can
/// meet another writer's change: it sends that version as `If-Match`, and a
/// refused precondition becomes a decision instead of a rollback.
///
/// What counts as a conflict (``conflict(in:)``): a `412 Precondition
/// Failed`, a `404` or `410` (the record was deleted on the server), and a
/// `409` if the edit says so. The outbox then reads the server's current
/// record (``serverRecord(from:)``) from the answer's body, or fetches it
/// with ``currentRequest`` when the body has none, and asks
/// ``resolve(_:)``, which by default merges field by field (``FieldMerge``):
///
/// | ``ConflictResolution`` | what the outbox does |
/// |---|---|
/// | ``ConflictResolution/rebase(_:)`` (fields changed on one side only) | sends the merged fields again on the server's version, with a new idempotency key; the cache shows them at once |
/// | ``ConflictResolution/acceptServer`` | undoes the optimistic change and writes the server's record (``write(_:_:)``); the entry ends as rolled back, with `.conflict` |
/// | ``ConflictResolution/keepForUser`` (a field changed on both sides) | keeps a conflict with base, mine and theirs (``Outbox/conflicts()``), holding back only the entry's lane until ``Outbox/resolveConflict(_:keeping:)`` or ``Outbox/resolveConflict(_:with:)`` |
///
/// For example, an edit of a contact's fields:
///
/// ```swift
/// struct EditContact: VersionedEdit {
///     struct Fields: Codable, Sendable, Equatable { var name: String; var email: String? }
///     struct Payload: Codable, Sendable { var id: Int; var version: RecordVersion; var base: Fields; var mine: Fields }
///     static let typeName = "EditContact.v1"
///     var payload: Payload
///     init(payload: Payload) { self.payload = payload }
///
///     var lane: String { "contact \(payload.id)" }
///     var record: RecordKey? { RecordKey("contact", payload.id) }
///     var baseVersion: RecordVersion? { payload.version }
///     var base: Fields { payload.base }
///     var mine: Fields { payload.mine }
///     var request: NetworkRequest { .put("contacts/\(payload.id)", json: payload.mine) }
///     var currentRequest: NetworkRequest { .get("contacts/\(payload.id)") }
///
///     func rebased(onto version: RecordVersion, base: Fields, mine: Fields) -> EditContact {
///         EditContact(payload: Payload(id: payload.id, version: version, base: base, mine: mine))
///     }
///     func serverRecord(from response: NetworkResponse) throws -> ServerRecord<Fields> {
///         let contact = try response.decode(ContactJSON.self)
///         return ServerRecord(version: RecordVersion(contact.version), fields: Fields(name: contact.name, email: contact.email))
///     }
///     func applyOptimistically(_ db: Database) throws { try ContactRow.update(payload.id, to: payload.mine, db) }
///     func commit(_ response: NetworkResponse, _ db: Database) throws { try write(serverRecord(from: response), db) }
///     func rollback(_ error: DepotError, _ db: Database) throws { try ContactRow.update(payload.id, to: payload.base, db) }
///     func write(_ theirs: ServerRecord<Fields>?, _ db: Database) throws {
///         guard let theirs else { return try ContactRow.delete(payload.id, db) }
///         if try RecordVersions.admit(theirs.version, for: RecordKey("contact", payload.id), in: db) {
///             try ContactRow.update(payload.id, to: theirs.fields, db)
///         }
///     }
/// }
/// ```
public protocol VersionedEdit: Mutation {
    /// The record's editable fields: what is merged, field by field.
    associatedtype Fields: Codable & Sendable & Equatable

    /// The fields as the user read them, at ``Mutation/baseVersion``.
    var base: Fields { get }

    /// The fields as the user wants them.
    var mine: Fields { get }

    /// The same edit, made again from `version`, whose fields are `base`,
    /// leading to `mine`: what a rebase sends, and what the outbox stores in
    /// place of this edit.
    func rebased(onto version: RecordVersion, base: Fields, mine: Fields) -> Self

    /// The server's record in an answer: the body of a `412` or of
    /// ``currentRequest``'s `200`, and of the edit's own `2xx`.
    func serverRecord(from response: NetworkResponse) throws -> ServerRecord<Fields>

    /// The request that reads the record as it is now, when a conflict's
    /// answer does not carry it. A `404` or `410` to it means deleted. Its
    /// other answers are judged as the edit's own: a `401` holds the lane;
    /// no network, a `408`, `429` or `5xx` try again later. Any other
    /// refusal, or a record that does not decode, stops the entry as failed,
    /// with its optimistic change kept for a retry or a discard.
    var currentRequest: NetworkRequest { get }

    /// Whether an answer that is not a 2xx is a conflict, and which: by
    /// default `412` is ``EditConflictKind/changed``, `404` and `410` are
    /// ``EditConflictKind/deleted``; other statuses (a `409` too) are not,
    /// and go on as for any mutation.
    func conflict(in response: NetworkResponse) -> EditConflictKind?

    /// Decides a conflict. By default, ``ConflictResolution/merge(_:)``: a
    /// three-way merge that rebases when no field changed on both sides, and
    /// otherwise keeps the conflict for the user.
    func resolve(_ conflict: EditConflict<Fields>) -> ConflictResolution<Fields>

    /// Writes the server's record into the cache, in place of the optimistic
    /// change (`nil`: it was deleted on the server): when the server's
    /// version is accepted, or the user keeps theirs.
    func write(_ theirs: ServerRecord<Fields>?, _ db: Database) throws
}

extension VersionedEdit {
    public func conflict(in response: NetworkResponse) -> EditConflictKind? {
        switch response.status {
        case 412: .changed
        case 404, 410: .deleted
        default: nil
        }
    }

    public func resolve(_ conflict: EditConflict<Fields>) -> ConflictResolution<Fields> {
        .merge(conflict)
    }
}

/// What kind of conflict an answer reports. Final on purpose: a record
/// either changed or went, and a `switch` over it is meant to be exhaustive.
public enum EditConflictKind: Sendable, Hashable {
    /// The record changed on the server since the edit's version.
    case changed
    /// The record is gone from the server.
    case deleted
}

/// A record as the server has it: its version and fields.
public struct ServerRecord<Fields: Codable & Sendable & Equatable>: Sendable, Codable, Equatable {
    /// The server's version of the record.
    public var version: RecordVersion
    /// Its fields.
    public var fields: Fields

    /// Makes a server record.
    public init(version: RecordVersion, fields: Fields) {
        self.version = version
        self.fields = fields
    }
}

/// A conflict, as ``VersionedEdit/resolve(_:)`` receives it: what the edit
/// was based on, what it wanted, and what the server holds now.
public struct EditConflict<Fields: Codable & Sendable & Equatable>: Sendable {
    /// The record.
    public var record: RecordKey?
    /// The version the edit was based on.
    public var baseVersion: RecordVersion?
    /// The fields the edit was based on.
    public var base: Fields
    /// The fields the edit wants.
    public var mine: Fields
    /// The server's record now; `nil` if it was deleted.
    public var theirs: ServerRecord<Fields>?

    /// Makes a conflict (the outbox does; tests of a `resolve` may too).
    public init(record: RecordKey?, baseVersion: RecordVersion?, base: Fields, mine: Fields, theirs: ServerRecord<Fields>?) {
        self.record = record
        self.baseVersion = baseVersion
        self.base = base
        self.mine = mine
        self.theirs = theirs
    }
}

/// What to do about a conflict. Final on purpose: these are the three
/// outcomes an edit that meets another writer can have.
public enum ConflictResolution<Fields: Codable & Sendable & Equatable>: Sendable {
    /// Send these fields again, on the server's version (the record must
    /// still exist), with a new idempotency key.
    case rebase(Fields)
    /// Give the edit up: undo its optimistic change and write the server's record.
    case acceptServer
    /// Keep the conflict, with both sides, for the user to decide; only the
    /// edit's lane waits.
    case keepForUser

    /// The built-in decision: a record deleted on the server is kept for the
    /// user; otherwise a three-way merge (``FieldMerge``) rebases on the
    /// server's version when no field changed on both sides to different
    /// values, and keeps the conflict for the user when one did. Fields that
    /// cannot be merged (they do not encode to a JSON object) are kept too.
    public static func merge(_ conflict: EditConflict<Fields>) -> ConflictResolution {
        guard let theirs = conflict.theirs else { return .keepForUser }
        switch try? FieldMerge.merge(base: conflict.base, mine: conflict.mine, theirs: theirs.fields) {
        case .merged(let fields)?: return .rebase(fields)
        case .conflicting?, nil: return .keepForUser
        }
    }
}
