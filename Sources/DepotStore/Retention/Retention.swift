import Depot
import Foundation
import Logging

/// A store's cache retention: its ``RetentionPolicy``s, an optional size
/// budget for the database file, and how eviction runs.
///
/// Eviction runs in the background, in batches of ``defaultBatchSize`` rows
/// (one write transaction each, yielding between them, so a sync waits for
/// at most one batch): when the store opens, a moment after each successful
/// ``CachingOperation`` write (a burst of syncs runs one eviction), and when
/// the app calls ``Store/evict()``. Live results see evicted rows as deletions.
/// A background run that fails (a policy's table dropped by a later
/// migration, a full disk) is logged as an error to the retention's logger;
/// ``Store/evict()`` throws instead.
///
/// For example:
///
/// ```swift
/// let retention = Retention(
///     policies: [RetentionPolicy(table: "feedItem",
///                                keeping: [.maxCount(1_000, newestBy: "published")],
///                                protecting: "isRead = 1")],
///     sizeBudget: 50_000_000)
/// let store = try Store(path: path, migrator: migrator, retention: retention)
/// ```
public struct Retention: Sendable {
    let policies: [RetentionPolicy]
    let sizeBudget: Int?
    let batchSize: Int
    let delay: Duration
    let clock: any Clock<Duration>
    let logger: Logger

    /// Rows deleted per write transaction unless the retention says otherwise.
    public static let defaultBatchSize = 500
    /// How long eviction waits after a sync for the next one, so that a burst
    /// of syncs runs one eviction.
    public static let defaultDelay: Duration = .seconds(2)

    /// Makes a retention.
    ///
    /// - Parameters:
    ///   - policies: One policy per table (a table named twice gets both).
    ///   - sizeBudget: The most bytes the database's pages may take. Over it,
    ///     eviction takes unprotected rows of the policies' tables oldest
    ///     first (by each policy's `maxAge` date column, else its `maxCount`
    ///     column, read as dates), then gives the freed pages back to the file
    ///     system with `PRAGMA incremental_vacuum`. The store turns on
    ///     `auto_vacuum = INCREMENTAL` when it opens: a new file gets it at
    ///     once; an existing one is rewritten by one `VACUUM` at that open.
    ///   - batchSize: Rows per write transaction.
    ///   - delay: How long after a sync eviction starts; syncs in the meantime join it.
    ///   - clock: Where the delay is measured: inject a manual clock in tests.
    ///   - logger: Where a failed background eviction is logged, as an error
    ///     with its ``Depot/DepotError`` (label `depot` by default, as the
    ///     controller's).
    public init(
        policies: [RetentionPolicy],
        sizeBudget: Int? = nil,
        batchSize: Int = Retention.defaultBatchSize,
        delay: Duration = Retention.defaultDelay,
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "depot")
    ) {
        self.policies = policies
        self.sizeBudget = sizeBudget
        self.batchSize = batchSize
        self.delay = delay
        self.clock = clock
        self.logger = logger
    }
}

/// What one eviction did.
///
/// For example:
///
/// ```swift
/// let report = try await store.evict()
/// print(report.rowsEvicted["feedItem", default: 0], "items in", report.batches, "batches")
/// ```
public struct EvictionReport: Sendable, Hashable, CustomStringConvertible {
    /// Rows deleted, by table.
    public internal(set) var rowsEvicted: [String: Int] = [:]
    /// Write transactions that deleted rows.
    public internal(set) var batches = 0
    /// The bytes the database's pages took when eviction ended, when a size budget is set.
    public internal(set) var databaseSize: Int?

    /// Every row deleted.
    public var totalEvicted: Int { rowsEvicted.values.reduce(0, +) }

    public var description: String {
        let tables = rowsEvicted.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return "evicted \(totalEvicted) rows (\(tables.isEmpty ? "none" : tables)) in \(batches) \(batches == 1 ? "batch" : "batches")"
    }

    mutating func add(_ deleted: [String: Int]) {
        guard deleted.values.contains(where: { $0 > 0 }) else { return }
        rowsEvicted.merge(deleted.filter { $0.value > 0 }, uniquingKeysWith: +)
        batches += 1
    }
}
