import Depot
import Foundation
import GRDB

/// One endpoint that changes server state, as a value that can wait in the
/// outbox across offline periods, quits and crashes.
///
/// Reads are ``/Depot/NetworkOperation``s; writes are mutations. A mutation is stored
/// before its first byte leaves: its ``payload`` is encoded into the app's own
/// store, under its type's ``typeName``, and rebuilt with ``init(payload:)``
/// on a later launch. Its local effect is applied in the same transaction, so
/// the user sees it at once, in the same live results the UI already reads.
///
/// For example, a post that shows as "sending…" until the server answers:
///
/// ```swift
/// struct SendPost: Mutation {
///     struct Payload: Codable, Sendable { var localID: String; var text: String }
///     static let typeName = "SendPost.v1"
///     var payload: Payload
///     init(payload: Payload) { self.payload = payload }
///
///     var lane: String { "posts" }
///     var request: NetworkRequest { .post("posts", json: ["text": payload.text]) }
///
///     func applyOptimistically(_ db: Database) throws {
///         try PostRow(localID: payload.localID, serverID: nil, text: payload.text, isPending: true).upsert(db)
///     }
///     func commit(_ response: NetworkResponse, _ db: Database) throws {
///         // The same row, now with the server's id: live results see one update.
///         let sent = try response.decode(SentPost.self)
///         try PostRow(localID: payload.localID, serverID: sent.id, text: sent.text, isPending: false).upsert(db)
///     }
///     func rollback(_ error: DepotError, _ db: Database) throws {
///         try PostRow.deleteOne(db, key: payload.localID)
///     }
/// }
/// ```
///
/// The contract:
/// - ``applyOptimistically(_:)``, ``commit(_:_:)`` and ``rollback(_:_:)`` run
///   inside the outbox's write transactions, together with the outbox row's
///   insert or delete: all of it lands, or none of it.
/// - Exactly one of ``commit(_:_:)`` and ``rollback(_:_:)`` runs, once.
/// - ``applyOptimistically(_:)`` may run more than once: a ``CachingOperation``
///   that writes while the mutation is pending applies it again on top of the
///   server's rows, in the same transaction, so that a refresh never undoes
///   what the user did. Write it as an upsert ("the row is so"), not as an
///   increment.
/// - Every attempt sends the same `Idempotency-Key` (and ``baseVersion``, if
///   any, as `If-Match`); the server must honour the key
///   for delivery to be exactly once (the outbox cannot know whether a lost
///   answer's request arrived).
/// - ``typeName`` must not change while mutations of the type may be queued:
///   change it (`"SendPost.v2"`) together with an incompatible payload, and
///   keep registering the old type until its rows are gone.
public protocol Mutation: Sendable {
    /// What is stored to rebuild the mutation on a later launch.
    associatedtype Payload: Codable & Sendable

    /// The stable name stored with each queued mutation of this type.
    static var typeName: String { get }

    /// Rebuilds a mutation from its stored payload.
    init(payload: Payload)

    /// What is stored.
    var payload: Payload { get }

    /// Mutations in one lane are sent strictly in order, one at a time (all
    /// edits of one contact, say); lanes run in parallel. Default: the type's
    /// name, so a type's mutations go in order.
    var lane: String { get }

    /// The request. The outbox adds the `Idempotency-Key` header.
    var request: NetworkRequest { get }

    /// Default `.high`: what the user did goes before what the app fetches.
    var priority: Priority { get }

    /// Default `.default`.
    var category: OperationCategory { get }

    /// Default: ``/Depot/Timeout/default``.
    var timeout: Timeout { get }

    /// The local change the user sees at once, in the transaction that queues the mutation.
    func applyOptimistically(_ db: Database) throws

    /// Reconciles the server's answer (a 2xx) with the local rows, in the
    /// transaction that removes the mutation from the outbox: replace a local
    /// temporary id with the server's, say.
    func commit(_ response: NetworkResponse, _ db: Database) throws

    /// Undoes the optimistic change after a permanent failure, in the
    /// transaction that removes the mutation from the outbox.
    func rollback(_ error: DepotError, _ db: Database) throws
    /// The cached resources the server's answer makes stale (totals, other
    /// pages, lists the change moves an item between): they are marked
    /// stale in the commit's transaction, and the results on screen that
    /// show them refresh at once (see ``SyncLedger/invalidate(_:)``). A
    /// rollback invalidates nothing. Default: none.
    ///
    /// ```swift
    /// var invalidates: [CacheInvalidation] { [.tag("tasks")] }
    /// ```
    var invalidates: [CacheInvalidation] { get }

    /// Whether an answer means that the server is still processing an earlier
    /// attempt with the same key, so the mutation is tried again later.
    /// Default: a 409 whose body mentions the idempotency key (depot-server's
    /// answer to a concurrent duplicate).
    func isStillProcessing(_ response: NetworkResponse) -> Bool

    /// The error an answer that is not a 2xx becomes: what ``rollback(_:_:)``
    /// and the outbox's status show. Default: `DepotError.forStatus` with an
    /// excerpt of the body; override it to read the server's error format
    /// (field errors of a 422, say) into one sentence.
    func error(for response: NetworkResponse) -> DepotError

    /// The rows this mutation needs while it waits: eviction by a
    /// ``RetentionPolicy`` leaves them alone until the mutation is committed,
    /// rolled back or discarded. Default: none.
    ///
    /// For example, the post row that ``commit(_:_:)`` updates:
    ///
    /// ```swift
    /// var retainedRows: [RetainedRow] { [RetainedRow(table: "post", key: payload.localID)] }
    /// ```
    var retainedRows: [RetainedRow] { get }

    /// The record this mutation changes, if it changes one: the outbox stores
    /// it with the entry, so that ``RecordState`` shows the record's row as
    /// waiting for the server (or in conflict) without a table of the app's
    /// own. Default: none.
    var record: RecordKey? { get }

    /// The version of ``record`` this mutation was based on, as the cache
    /// held it when the user made the change (``RecordVersions/version(of:in:)``):
    /// every attempt sends it as `If-Match`, so that a server that has a newer
    /// version refuses the write (`412`) instead of losing the other change.
    /// A ``VersionedEdit`` turns that refusal into a merge or a kept
    /// conflict. Default: none (no `If-Match`).
    var baseVersion: RecordVersion? { get }
}

extension Mutation {
    public var lane: String { Self.typeName }
    public var priority: Priority { .high }
    public var category: OperationCategory { .default }
    public var timeout: Timeout { .default }
    public var invalidates: [CacheInvalidation] { [] }
    public var retainedRows: [RetainedRow] { [] }
    public var record: RecordKey? { nil }
    public var baseVersion: RecordVersion? { nil }

    public func isStillProcessing(_ response: NetworkResponse) -> Bool {
        response.status == 409 && response.text.localizedCaseInsensitiveContains("idempotency")
    }

    public func error(for response: NetworkResponse) -> DepotError {
        DepotError.forStatus(response.status, body: response.body, operation: Self.typeName)
    }
}
