import Depot
import DepotStore
import Foundation
import GRDB
import Synchronization

/// What Senbei's changes share: each is a ``DepotStore/Mutation`` that the
/// outbox stores before any byte leaves, sends with an `Idempotency-Key`,
/// and reconciles with the cache in one transaction.
///
/// The five changes (``CreateTask``, ``MarkTaskDone``, ``PostComment``,
/// ``DeleteComment``, ``CreateContact``) follow one scheme:
/// - **At once**, ``DepotStore/Mutation/applyOptimistically(_:)`` writes the
///   change into the cached rows, marked with a ``PendingChange``. A record
///   created here gets a temporary negative identifier, ``localID``.
/// - **Accepted** (2xx, or the replay of one): ``DepotStore/Mutation/commit(_:_:)``
///   replaces the temporary row with the server's (an upsert by the server's
///   identifier, so a refresh that already brought it leaves no duplicate).
/// - **Refused** (422, 404, …): ``DepotStore/Mutation/rollback(_:_:)`` undoes
///   the change and keeps a ``RejectedChange`` with the server's reason.
///
/// They are data work (category ``Depot/OperationCategory/senbei``): held until
/// a sign-in succeeds, like every other Senbei request.
///
/// For example:
///
/// ```swift
/// let outbox = Outbox(store: store, controller: controller, types: SenbeiApp.mutationTypes)
/// let ticket = try await outbox.send(CreateTask(name: "Call Ann", localID: -1))
/// // The task is in the cache now, pending; later:
/// let answer = await ticket.outcome()
/// ```
public protocol SenbeiMutation: Mutation {
    /// What the change gives back once the server accepted it.
    associatedtype Record: Sendable

    /// The change's own number, unique among changes: the temporary identifier
    /// of a record created here, and the ``RejectedChange``'s identifier.
    var localID: Int { get }

    /// What the change is, for people: `new task "Call Ann"`.
    var summary: String { get }

    /// The notification ``SenbeiApp`` posts once the server accepted it.
    static var didCommit: Notification.Name { get }

    /// The record as the cache holds it after ``DepotStore/Mutation/commit(_:_:)``.
    func record(from response: NetworkResponse, _ db: Database) throws -> Record

    /// The notification's `entity` for `record` (see ``SenbeiNotification``).
    func entity(of record: Record) -> any Sendable
}

extension SenbeiMutation {
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }

    /// Every accepted change shows in the activity stream: its cached copy is stale.
    public var invalidates: [CacheInvalidation] { [.key(FetchActivities().cacheKey)] }

    /// The name errors and notifications use: the type's (`CreateTask`).
    static var operationName: String { String(describing: Self.self) }

    /// Keeps the server's refusal with the change's summary, in the rollback's transaction.
    func reject(_ error: DepotError, _ db: Database) throws {
        try RejectedChange(id: localID, summary: summary, reason: SenbeiResponse.reason(for: error)).upsert(db)
    }
}

/// Temporary identifiers for records created here: negative, so they never
/// meet the server's, and growing in magnitude with time, so that rows
/// created here list in the order they were written.
enum LocalID {
    private static let counter = Mutex(0)

    /// A new identifier for a change made at `date`.
    static func next(at date: Date) -> Int {
        let milliseconds = max(0, Int(date.timeIntervalSince1970 * 1000))
        let sequence = counter.withLock { counter -> Int in
            counter = counter % 999 + 1
            return counter
        }
        return -(milliseconds * 1000 + sequence)
    }
}
