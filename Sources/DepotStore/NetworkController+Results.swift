import Depot
import Foundation
import GRDB

/// When results go to the network and when they make do with the cache.
///
/// For example, the design's five-minute top-songs cache:
///
/// ```swift
/// let songs = try controller.results(for: Song.order(Column("rank")),
///                                    refreshing: FetchTopSongs(),
///                                    policy: .cacheFirst(maxAge: .seconds(300)))
/// // Or fresh for as long as the server's Cache-Control or Expires says:
/// let asServed = try controller.results(for: Song.order(Column("rank")), refreshing: FetchTopSongs(), policy: .cacheFirst)
/// ```
///
/// A last sync stamped in the future (the device's clock was set back
/// since) is stale under `.cacheFirst` and `.cacheFirst(maxAge:)`: its age
/// means nothing. `.cacheThenNetwork` and `.networkOnly` refresh anyway, and
/// `.cacheOnly` never does.
public struct CachePolicy: Sendable, Hashable, CustomStringConvertible {
    enum Kind: Hashable {
        /// `nil`: as the last response said.
        case cacheFirst(maxAge: Duration?)
        case cacheThenNetwork
        case networkOnly
        case cacheOnly
    }

    let kind: Kind

    /// Show the cache; go to the network only if the last sync is older than
    /// `maxAge`, there never was one, or the resource was invalidated since
    /// (``SyncLedger/invalidate(_:)``). What the server said about freshness
    /// is ignored: this `maxAge` wins.
    public static func cacheFirst(maxAge: Duration) -> CachePolicy { CachePolicy(kind: .cacheFirst(maxAge: maxAge)) }
    /// Show the cache; go to the network only once the last response is
    /// stale by its own headers, there never was one, or the resource was
    /// invalidated since: HTTP's freshness, as a browser's cache keeps it.
    ///
    /// - `Cache-Control: max-age=N` keeps it fresh for N s after it arrived,
    ///   less its `Age`; without `max-age`, `Expires` does (its distance
    ///   from the response's `Date`, so the device's clock does not matter).
    /// - `no-cache` makes it stale at once; the refresh is conditional, so an
    ///   unchanged resource costs a 304, whose own headers give the next
    ///   freshness. `no-store` makes it stale at once too, and keeps no
    ///   validators: every refresh is a full request.
    /// - `stale-while-revalidate=N`: for N s past freshness, ``SyncStatus/refresh(force:)``
    ///   starts the refresh and returns at once, the cached rows being good
    ///   enough meanwhile. Past that window it waits for the refresh, as for
    ///   any stale resource. Results show their cached rows either way.
    /// - A response that says none of these is stale at once.
    ///
    /// ``SyncLedger/Entry/freshUntil`` and ``SyncLedger/Entry/staleWhileRevalidateUntil``
    /// say what the last response allowed.
    public static let cacheFirst = CachePolicy(kind: .cacheFirst(maxAge: nil))
    /// Show the cache at once, then refresh. The default.
    public static let cacheThenNetwork = CachePolicy(kind: .cacheThenNetwork)
    /// Show nothing until the network answered, then show the cache it wrote. If
    /// the refresh fails the results stay empty and the error is in the sync status.
    public static let networkOnly = CachePolicy(kind: .networkOnly)
    /// Never go to the network: show what the cache has.
    public static let cacheOnly = CachePolicy(kind: .cacheOnly)

    public var description: String {
        switch kind {
        case .cacheFirst(let maxAge?): "cacheFirst(maxAge: \(maxAge))"
        case .cacheFirst(nil): "cacheFirst"
        case .cacheThenNetwork: "cacheThenNetwork"
        case .networkOnly: "networkOnly"
        case .cacheOnly: "cacheOnly"
        }
    }
}

extension NetworkController {
    /// Live results from the cache, kept fresh by `operation` according to
    /// `policy`: the design's `requestMyData() -> NSFetchedResultsController`.
    ///
    /// The results show what is cached immediately. The refresh runs in the
    /// background; its progress and errors are in the results'
    /// ``ResultsController/syncStatus``. When the network fails or is gone, the
    /// cached rows stay on screen and the error is in the status, never an empty
    /// screen.
    ///
    /// For example:
    ///
    /// ```swift
    /// let songs = try controller.results(
    ///     for: Song.order(Column("rank")),
    ///     refreshing: FetchTopSongs(),
    ///     policy: .cacheFirst(maxAge: .seconds(300)))
    /// songs.syncStatus?.autoRefresh(every: .seconds(300))
    /// ```
    ///
    /// - Parameters:
    ///   - request: What to show, filtered and sorted.
    ///   - sectionKey: The section name of a record; `nil` for one section.
    ///   - operation: The operation that fills the tables `request` reads.
    ///   - policy: When to go to the network. Default: `.cacheThenNetwork`.
    /// - Throws: `.storage` if no store is configured or the first fetch fails.
    @MainActor
    @inlinable
    public func results<Query: FetchRequest & Sendable, Operation: CachingOperation>(
        for request: Query,
        sectionedBy sectionKey: (@Sendable (Query.RowDecoder) -> String)? = nil,
        refreshing operation: Operation,
        policy: CachePolicy = .cacheThenNetwork
    ) throws(DepotError) -> ResultsController<Query.RowDecoder> where Query.RowDecoder: Identifiable & Equatable & Sendable, Query.RowDecoder.ID: Sendable {
        // Inlinable so that fetching, snapshotting and diffing are specialized for the record.
        try makeResults(
            query: ResultsQuery(request),
            refresh: ResultsDiff.refresh(sectionKey: sectionKey),
            operation: operation,
            policy: policy)
    }

    @MainActor
    @usableFromInline
    func makeResults<Record, Operation: CachingOperation>(
        query: ResultsQuery<Record>,
        refresh: @escaping ResultsDiff.Refresh<Record>,
        operation: Operation,
        policy: CachePolicy,
        firstRows: [Record]? = nil,
        refreshes: Bool = true
    ) throws(DepotError) -> ResultsController<Record> {
        let store = try requireStore()
        let status = try SyncStatus(refreshing: operation, with: self, policy: policy)
        let results = try ResultsController(store: store, query: query, refresh: refresh, held: policy == .networkOnly, firstRows: firstRows)
        results.syncStatus = status

        guard status.needsRefresh else { return results }
        if policy == .networkOnly {
            // Held until a sync succeeds: this refresh or any later one (a failed
            // first refresh must not hide the rows for good), and not a cancelled
            // one (which leaves no error, but no answer either). Only a success
            // writes the ledger's last sync, so any change of it counts (also to
            // an earlier date, after the clock was set back).
            let syncedBefore = status.lastSynced
            let updates = status.updates()
            results.revealTask = Task { @MainActor [weak results] in
                for await state in updates {
                    guard let synced = state.lastSynced, synced != syncedBefore else { continue }
                    results?.reveal()
                    return
                }
            }
        }
        if refreshes { results.refreshTask = Task { @MainActor in await status.refresh(force: true) } }
        return results
    }
}
