import Depot
import Foundation
import GRDB

/// Whether a cached record has changes that wait for the server, or a
/// conflict kept for the user, as the outbox knows it from each entry's
/// ``Mutation/record``: Firestore's `hasPendingWrites`, without a table of
/// the app's own.
///
/// Annotate the request a ``ResultsController`` watches with
/// ``columns(kind:id:)``, and read the state from each row; the results
/// refresh when the outbox or its conflicts change:
///
/// ```swift
/// struct ContactRow: FetchableRecord, Sendable {
///     var contact: Contact
///     var state: RecordState
///     init(row: Row) throws {
///         contact = try Contact(row: row)
///         state = RecordState(row: row)
///     }
/// }
///
/// let request = Contact.all()
///     .annotated(with: RecordState.columns(kind: "contact", id: Column("id")))
///     .asRequest(of: ContactRow.self)
/// // row.state.hasPendingWrites: "◌"; row.state.hasConflict: "⚠"
/// ```
public struct RecordState: Hashable, Sendable {
    /// Some change of the record waits in the outbox (sending, failed, or in conflict).
    public var hasPendingWrites: Bool
    /// A change of the record is in conflict with the server's version, kept for the user.
    public var hasConflict: Bool

    /// Makes a state.
    public init(hasPendingWrites: Bool = false, hasConflict: Bool = false) {
        self.hasPendingWrites = hasPendingWrites
        self.hasConflict = hasConflict
    }

    /// The annotation column that says whether the record has pending writes.
    public static let pendingWritesColumn = "depotHasPendingWrites"
    /// The annotation column that says whether the record has a conflict.
    public static let conflictColumn = "depotHasConflict"

    /// The two columns to annotate a request with: whether the record `id`
    /// (an expression of the request's own table: its identifier column) of
    /// `kind` has pending writes, and a conflict.
    public static func columns(kind: String, id: some SQLExpressible & Sendable) -> [any SQLSelectable] {
        [
            // The depot tables' columns are renamed in a derived table, so
            // that `id` (qualified or not) can only name the request's own column.
            SQL("EXISTS (SELECT 1 FROM (SELECT recordKind AS depotKind, recordID AS depotRecord FROM \(sql: OutboxTable.name)) WHERE depotKind = \(kind) AND depotRecord = CAST(\(id) AS TEXT))")
                .sqlExpression.forKey(pendingWritesColumn),
            SQL("EXISTS (SELECT 1 FROM (SELECT recordKind AS depotKind, recordID AS depotRecord FROM \(sql: ConflictTable.name)) WHERE depotKind = \(kind) AND depotRecord = CAST(\(id) AS TEXT))")
                .sqlExpression.forKey(conflictColumn),
        ]
    }

    /// The state a row annotated with ``columns(kind:id:)`` carries (no
    /// pending writes, no conflict, where the columns are missing).
    public init(row: Row) {
        self.init(hasPendingWrites: row[Self.pendingWritesColumn] ?? false, hasConflict: row[Self.conflictColumn] ?? false)
    }

    /// The state of `record` now, read in `db`.
    public static func of(_ record: RecordKey, in db: Database) throws -> RecordState {
        let row = try Row.fetchOne(
            db,
            sql: """
                SELECT EXISTS (SELECT 1 FROM \(OutboxTable.name) WHERE recordKind = ?1 AND recordID = ?2) AS pending,
                       EXISTS (SELECT 1 FROM \(ConflictTable.name) WHERE recordKind = ?1 AND recordID = ?2) AS conflict
                """,
            arguments: [record.kind, record.id])
        return RecordState(hasPendingWrites: row?["pending"] ?? false, hasConflict: row?["conflict"] ?? false)
    }
}
