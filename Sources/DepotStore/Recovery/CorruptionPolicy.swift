import Depot
import GRDB

/// What a ``Store`` does when its file turns out to be damaged: rebuild it,
/// keeping what cannot be fetched again, or stop with an error.
///
/// A cache is mostly rebuildable from the network, so rebuilding is the
/// default: the damaged file is moved aside under a dated name (never
/// deleted), a fresh file is migrated, and what the network cannot give back
/// is salvaged into it:
///
/// - the ``Outbox``'s entries, the writes the server has not seen;
/// - the rows a ``RetentionPolicy`` protects (read marks, starred items);
/// - the rows the app declares precious here.
///
/// ```swift
/// let store = try Store(
///     path: path,
///     migrator: migrator,
///     onCorruption: .rebuild(keeping: [
///         .table("draft"),
///         .rows(in: "item", where: "isStarred = 1"),
///     ]))
/// if let recovery = store.lastRecovery {
///     print(recovery) // "The cache file was damaged and has been rebuilt: …"
/// }
/// ```
///
/// An app whose store holds data it cannot lose at all chooses ``fail``, and
/// deals with the `.storage` error itself: its
/// ``Depot/DepotError/storageProblem`` is `.damaged`.
public struct CorruptionPolicy: Sendable, CustomStringConvertible {
    /// The rows to salvage besides the outbox and the protected rows; `nil` for ``fail``.
    let precious: [PreciousRows]?

    /// Rebuilds a damaged file, salvaging the outbox, the rows retention
    /// protects, and `precious`. The default.
    public static func rebuild(keeping precious: [PreciousRows] = []) -> CorruptionPolicy {
        CorruptionPolicy(precious: precious)
    }

    /// Leaves a damaged file as it is and fails: the store does not open, and
    /// a store damaged during use reports it and goes on failing.
    public static let fail = CorruptionPolicy(precious: nil)

    public var description: String {
        guard let precious else { return "fail" }
        return "rebuild(keeping: [\(precious.map(\.description).joined(separator: ", "))])"
    }
}

/// Rows of one table that cannot be fetched again, and so are salvaged when
/// a damaged file is rebuilt (see ``CorruptionPolicy``).
public struct PreciousRows: Sendable, Hashable, CustomStringConvertible {
    /// The table.
    public let table: String
    /// An SQL expression over the table's columns that picks the rows, or
    /// `nil` for all of them.
    public let predicate: String?

    /// Every row of `table`: drafts, settings, anything only the device holds.
    public static func table(_ table: String) -> PreciousRows {
        PreciousRows(table: table, predicate: nil)
    }

    /// The rows of `table` for which `predicate`, an SQL expression over
    /// its columns, is true or `NULL`: `"isStarred = 1"`.
    public static func rows(in table: String, where predicate: String) -> PreciousRows {
        PreciousRows(table: table, predicate: predicate)
    }

    public var description: String {
        predicate.map { "\(table) where \($0)" } ?? table
    }
}
