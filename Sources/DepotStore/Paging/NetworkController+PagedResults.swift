import Depot
import GRDB

extension NetworkController {
    /// Live results of a paged list: what the cache holds now, grown a page
    /// at a time by ``PagedResults/loadNextPage()`` from `endpoint`.
    ///
    /// The first page loads according to `policy`, as
    /// ``results(for:sectionedBy:refreshing:policy:)`` decides for its one
    /// operation (by the first page's last sync); later pages load when asked.
    ///
    /// For example:
    ///
    /// ```swift
    /// let contacts = try controller.pagedResults(
    ///     for: Contact.order(Column("page"), Column("position")),
    ///     pages: ContactPages(perPage: 20))
    /// await contacts.loadNextPage()      // page 2, after the first
    /// await contacts.refresh()           // page 1 again; later pages go when it lands
    /// ```
    ///
    /// - Parameters:
    ///   - request: What to show, filtered and sorted: the rows the pages write.
    ///   - sectionKey: The section name of a record; `nil` for one section.
    ///   - endpoint: The paged list on the server.
    ///   - policy: When to load the first page. Default: `.cacheThenNetwork`.
    /// - Throws: `.storage` if no store is configured or the first fetch fails.
    @MainActor
    @inlinable
    public func pagedResults<Query: FetchRequest & Sendable, Endpoint: PageableEndpoint>(
        for request: Query,
        sectionedBy sectionKey: (@Sendable (Query.RowDecoder) -> String)? = nil,
        pages endpoint: Endpoint,
        policy: CachePolicy = .cacheThenNetwork
    ) throws(DepotError) -> PagedResults<Query.RowDecoder> where Query.RowDecoder: Identifiable & Equatable & Sendable, Query.RowDecoder.ID: Sendable {
        // Inlinable so that fetching, snapshotting and diffing are specialized for the record.
        try makePagedResults(
            query: ResultsQuery(request),
            refresh: ResultsDiff.refresh(sectionKey: sectionKey),
            endpoint: endpoint,
            policy: policy)
    }

    @MainActor
    @usableFromInline
    func makePagedResults<Record, Endpoint: PageableEndpoint>(
        query: ResultsQuery<Record>,
        refresh: @escaping ResultsDiff.Refresh<Record>,
        endpoint: Endpoint,
        policy: CachePolicy
    ) throws(DepotError) -> PagedResults<Record> {
        let store = try requireStore()
        let first: Endpoint.PageOperation
        do {
            first = try endpoint.operation(for: endpoint.firstPage)
        } catch {
            throw DepotError.wrap(error, operation: nil, fallback: .invalidPage).withDetail("the endpoint cannot make its first page")
        }
        let held = policy == .networkOnly
        // The first page's status refreshes the way pull-to-refresh does (an
        // invalidation, an auto-refresh): through the paged results, so the
        // list starts again from page one and its paging state follows.
        let owner = PagedResultsOwner<Record>()
        let status = SyncStatus(key: PageFetch(endpoint: endpoint, page: first, position: endpoint.firstPage, index: 0).cacheKey, store: store, clock: configuration.environment.clock, policy: policy, events: { [weak self] in
            self?.events() ?? DepotStream(AsyncStream { $0.finish() })
        }) { _ async throws(DepotError) in
            await owner.refresh()
        }
        let results = try ResultsController(store: store, query: query, refresh: refresh, held: held)
        results.syncStatus = status
        let paged = try PagedResults(results: results, endpoint: endpoint, controller: self, store: store, held: held)
        owner.paged = paged
        // The first page is due by the policy, or was never loaded (a list
        // whose first page another operation filled must start its paging).
        if policy != .cacheOnly, status.needsRefresh || paged.pageCount == 0 {
            paged.initialLoad = paged.startRefresh()
        }
        return paged
    }
}

/// Lets the first page's ``SyncStatus`` refresh the paged results it belongs
/// to without keeping them alive.
@MainActor
final class PagedResultsOwner<Record: FetchableRecord & Identifiable & Equatable & Sendable> where Record.ID: Sendable {
    weak var paged: PagedResults<Record>?

    func refresh() async {
        await paged?.refresh()
    }
}
