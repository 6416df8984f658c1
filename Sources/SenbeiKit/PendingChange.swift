import GRDB

/// A change made here that the server has not confirmed yet, as the cached row
/// it touches shows it: the lists print it at once, marked (`◌ sending…`),
/// until the outbox's answer replaces the row (commit) or undoes the change
/// (rollback).
///
/// An app's own enum: the three changes Senbei makes offline. A `switch` over
/// it is meant to be exhaustive.
///
/// For example, the tasks still waiting for the server:
///
/// ```swift
/// let waiting = try await store.read { db in try CRMTask.filter(Column("pending") != nil).fetchAll(db) }
/// ```
public enum PendingChange: String, Codable, Sendable, Hashable, DatabaseValueConvertible {
    /// Created here; the row's identifier is temporary (negative) until the
    /// server's row replaces it.
    case create
    /// A task marked done here.
    case complete
    /// A comment deleted here.
    case delete
}

/// A change the server refused after it was queued, kept until someone saw it:
/// what it was and the server's reason. A row of the `rejectedChange` table,
/// written in the same transaction as the rollback that undid the change.
///
/// For example, what the CLI prints after a queued task came back with a 422:
///
/// ```swift
/// for rejected in try await app.rejectedChanges() {
///     print(SenbeiPresentation.rejectionLine(rejected))   // Not saved: new task " ": name can't be blank.
/// }
/// ```
public struct RejectedChange: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// The change's local identifier (``SenbeiMutation/localID``).
    public var id: Int
    /// What the change was: `new task "Call Ann"`.
    public var summary: String
    /// The server's reason, in its words: `name can't be blank`.
    public var reason: String

    /// Makes a rejection.
    public init(id: Int, summary: String, reason: String) {
        self.id = id
        self.summary = summary
        self.reason = reason
    }

    /// The table's name: `rejectedChange`.
    public static let databaseTableName = "rejectedChange"
}
