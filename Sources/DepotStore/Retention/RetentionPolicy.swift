import Depot
import Foundation

/// How long the rows of one table stay in the cache: the rules that evict
/// them, and the rows that no rule may take.
///
/// A row is evicted when any of the policy's rules says so, unless it is
/// protected: the policy's `protecting` predicate holds for it (a row for
/// which the predicate is `NULL` counts as protected), or a queued
/// ``Mutation`` names it in ``Mutation/retainedRows``.
///
/// For example, the newest 1,000 items of each feed, none older than 30
/// days, and every read or starred one whatever its age:
///
/// ```swift
/// let items = RetentionPolicy(
///     table: "feedItem",
///     keeping: [
///         .maxCount(1_000, newestBy: "published", per: "feed"),
///         .maxAge(.seconds(30 * 86_400), by: "published"),
///     ],
///     protecting: "isRead = 1 OR starred = 1")
/// ```
///
/// Names are checked when the store opens (and at each ``Store/evict()``):
/// an unknown table or column, or a predicate SQLite cannot read, fails
/// with a `.storage` error that says which.
public struct RetentionPolicy: Sendable, CustomStringConvertible {
    let table: String
    let rules: [RetentionRule]
    let protected: String?

    /// Makes a policy for `table`.
    ///
    /// - Parameters:
    ///   - table: The table whose rows the policy evicts.
    ///   - rules: What to keep; a row that any rule does not keep is evicted.
    ///   - predicate: An SQL expression over the table's columns; the rows
    ///     for which it holds are never evicted (`"isRead = 1"`).
    public init(table: String, keeping rules: [RetentionRule], protecting predicate: String? = nil) {
        self.table = table
        self.rules = rules
        self.protected = predicate
    }

    public var description: String {
        var text = "\(table): " + rules.map(\.description).joined(separator: ", ")
        if let protected { text += ", protecting \(protected)" }
        return text
    }
}

/// One rule of a ``RetentionPolicy``: what it keeps; the table's other rows go.
///
/// Date columns hold GRDB dates (text, as `Date` is stored) or seconds
/// since 1970 (numbers). A row whose date is `NULL` is kept by ``maxAge(_:by:)``.
public struct RetentionRule: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Sendable, Hashable {
        case maxAge(Duration, column: String)
        case maxCount(Int, column: String, partition: String?)
        case referenced(results: Bool, syncKeyColumn: String?)
    }

    let kind: Kind

    /// Keeps the rows whose `column` date is at most `age` old (by the
    /// store's environment's `date`); older ones go.
    ///
    /// For example: `.maxAge(.seconds(7 * 86_400), by: "fetchedAt")`.
    public static func maxAge(_ age: Duration, by column: String) -> RetentionRule {
        RetentionRule(kind: .maxAge(age, column: column))
    }

    /// Keeps the `count` rows with the greatest `column` values (the newest),
    /// in each partition when `partition` names a column (a feed, a sync key):
    /// the oldest go first. Protected rows count toward `count` but are never
    /// evicted. Ties are broken by the primary key (or rowid), greater kept.
    ///
    /// For example, the newest 1,000 items of each feed:
    /// `.maxCount(1_000, newestBy: "published", per: "feed")`.
    public static func maxCount(_ count: Int, newestBy column: String, per partition: String? = nil) -> RetentionRule {
        RetentionRule(kind: .maxCount(count, column: column, partition: partition))
    }

    /// Keeps only the rows that something still refers to: a live
    /// ``ResultsController`` whose current snapshot shows them, or a sync
    /// key still in the ``SyncLedger``. Rows that none of `references` refers
    /// to go.
    ///
    /// For example, the items of the feeds the app still syncs, plus the ones
    /// on screen: `.whileReferenced(by: .syncKey(in: "feed"), .results)`.
    public static func whileReferenced(by references: RetentionReference...) -> RetentionRule {
        RetentionRule(kind: .referenced(
            results: references.contains(.results),
            syncKeyColumn: references.lazy.compactMap(\.syncKeyColumn).first))
    }

    public var description: String {
        switch kind {
        case .maxAge(let age, let column): "at most \(age) old by \(column)"
        case .maxCount(let count, let column, let partition):
            "the newest \(count) by \(column)" + (partition.map { " per \($0)" } ?? "")
        case .referenced(let results, let column):
            "while referenced by " + [results ? "results" : nil, column.map { "a sync key in \($0)" }].compactMap { $0 }.joined(separator: " or ")
        }
    }
}

/// What can keep a row alive under ``RetentionRule/whileReferenced(by:)``.
public struct RetentionReference: Sendable, Hashable {
    let syncKeyColumn: String?
    let isResults: Bool

    /// The current snapshot of any live ``ResultsController`` whose record
    /// type is this table's `TableRecord`. Rows are matched by primary key:
    /// the encoded record's key columns when it is an `EncodableRecord`,
    /// else its `id` for a one-column key.
    public static let results = RetentionReference(syncKeyColumn: nil, isResults: true)

    /// A sync key: the rows whose `column` value is a key of the
    /// ``SyncLedger`` (the ``CachingOperation/cacheKey`` that wrote them).
    public static func syncKey(in column: String) -> RetentionReference {
        RetentionReference(syncKeyColumn: column, isResults: false)
    }
}
