import Depot
import Foundation
import GRDB
import Observation

/// Live results of a paged list: a ``ResultsController`` over the cache,
/// grown a page at a time from a ``PageableEndpoint``. Made by
/// ``Depot/NetworkController/pagedResults(for:sectionedBy:pages:policy:)``.
///
/// Each page lands in the cache in one transaction (its rows, its ledger
/// entry, and the paging state); the results show every row the request
/// selects, so pages that overlap (rows shifted while the user scrolled)
/// show each row once. ``refresh()`` loads the first page again; the rows on
/// screen stay until it lands, and then, in the same transaction, rows that
/// only later pages brought go.
///
/// How far the list got is kept in the store: after a cold start offline
/// the pages loaded are on screen, ``hasMore`` is still `true`, and
/// ``loadNextPage()`` says why it cannot go on in ``pageError``.
///
/// For example, in SwiftUI:
///
/// ```swift
/// List(contacts.fetchedObjects) { contact in
///     Text(contact.name)
///         .onAppear { if contact.id == contacts.fetchedObjects.last?.id { Task { await contacts.loadNextPage() } } }
/// }
/// .refreshable { await contacts.refresh() }
/// ```
@MainActor
@Observable
public final class PagedResults<Record: FetchableRecord & Identifiable & Equatable & Sendable> where Record.ID: Sendable {
    /// The live results: every row the request selects, pages included.
    public let results: ResultsController<Record>
    /// Whether there is another page to load. `false` after the last page,
    /// and after the server sent a page that makes no progress (see ``pageError``).
    public private(set) var hasMore: Bool
    /// Whether a page (the first one too) is loading.
    public private(set) var isLoadingPage = false
    /// Why the last page load failed, cleared by the next success. A code of
    /// ``Depot/DepotError/Code/invalidPage`` ended paging until ``refresh()``;
    /// others (`.offline`, say) leave ``hasMore`` as it was.
    public private(set) var pageError: DepotError?
    /// How many pages the cache holds for this list.
    public private(set) var pageCount: Int
    /// Where the next page starts, or `nil` before the first page and after the last.
    public private(set) var nextPage: PagePosition?

    /// The current results.
    public var snapshot: ResultsSnapshot<Record> { results.snapshot }
    /// The sections of ``snapshot``.
    public var sections: [ResultsSection<Record>] { results.sections }
    /// Every record of ``snapshot``, section after section.
    public var fetchedObjects: [Record] { results.fetchedObjects }
    /// The first page's sync status: when it last synced and its last error.
    public var syncStatus: SyncStatus? { results.syncStatus }

    /// The paging key (``PageableEndpoint/pagingKey``).
    @ObservationIgnored public let pagingKey: String

    @ObservationIgnored private let store: Store
    @ObservationIgnored private let load: @MainActor (_ index: Int, _ position: PagePosition) async throws(DepotError) -> Void
    @ObservationIgnored private let firstPage: PagePosition
    @ObservationIgnored private let events: @Sendable () -> NetworkEvents
    @ObservationIgnored private let operationName: String
    /// Set when the server made no progress: paging stops until a refresh.
    @ObservationIgnored private var ended = false
    @ObservationIgnored private var nextPageTask: Task<Void, Never>?
    @ObservationIgnored private var refreshTask: Task<Void, Never>?
    /// This list's client of the store's ``CommitFanout``, which follows its paging state.
    @ObservationIgnored private var stateWatch: UInt64?
    /// The refresh the policy started when the results were made; tests await it.
    @ObservationIgnored var initialLoad: Task<Void, Never>?
    @ObservationIgnored private var held: Bool
    /// Page loads running (a next page and a refresh may overlap).
    @ObservationIgnored private var loads = 0

    init<Endpoint: PageableEndpoint>(
        results: ResultsController<Record>,
        endpoint: Endpoint,
        controller: NetworkController,
        store: Store,
        held: Bool
    ) throws(DepotError) {
        self.results = results
        self.store = store
        self.held = held
        pagingKey = endpoint.pagingKey
        firstPage = endpoint.firstPage
        events = { controller.events() }
        operationName = (try? endpoint.operation(for: endpoint.firstPage).name) ?? String(describing: Endpoint.self)
        load = { index, position async throws(DepotError) in
            let page: Endpoint.PageOperation
            do {
                page = try endpoint.operation(for: position)
            } catch {
                throw DepotError.wrap(error, operation: nil, fallback: .invalidPage).withDetail("the endpoint cannot make the page at \(position)")
            }
            do throws(DepotError) {
                _ = try await controller.perform(PageFetch(endpoint: endpoint, page: page, position: position, index: index))
            } catch {
                // As a sync status does: a failure that never reached `process`
                // (offline, say) is in the ledger too, so the page's status says so.
                if error.code != .cancelled { await store.ledger.recordFailure(error, for: page.cacheKey) }
                throw error
            }
        }
        // Read at once: the first frame already knows how far the list got.
        let key = pagingKey
        let state: PagingTable.State
        do {
            state = try store.writer.read { db in try PagingTable.state(for: key, in: db) }
        } catch {
            throw DepotError.storage(error, detail: "cannot read the paging state of \(key)")
        }
        hasMore = state.hasMore
        pageCount = state.pageCount
        nextPage = state.next
        watchState()
    }

    isolated deinit {
        if let stateWatch { store.fanout.remove(stateWatch) }
        nextPageTask?.cancel()
        refreshTask?.cancel()
        initialLoad?.cancel()
    }

    /// Loads the page after the last one loaded (the first page when there
    /// is none) and returns when it landed or failed. A page that brings
    /// only rows already listed (a page-numbered list that got a page of
    /// new rows on top since the last load) is followed by the next one. A
    /// call while a page loads waits for that one; a call with no more pages
    /// returns at once.
    ///
    /// Failures are not thrown: they are in ``pageError``. Offline, the pages
    /// loaded stay on screen and ``hasMore`` stays `true`.
    public func loadNextPage() async {
        if let nextPageTask { return await nextPageTask.value }
        guard hasMore, !ended else { return }
        let task = Task { @MainActor in
            var state = self.readState()
            var index = state?.pageCount ?? self.pageCount
            var position = index == 0 ? self.firstPage : (state?.next ?? self.nextPage)
            while let next = position {
                await self.run(index: index, position: next)
                // A page that brought only rows already shown (new rows on top
                // shifted a page-numbered list): the next one, at once.
                state = self.readState()
                guard let state, state.repeatedPages > 0, state.pageCount > index, !self.ended, self.pageError == nil else { break }
                index = state.pageCount
                position = state.next
            }
            self.nextPageTask = nil
        }
        nextPageTask = task
        await task.value
    }

    /// Loads the first page again: pull-to-refresh. The rows on screen stay
    /// until it lands; then, in one transaction, the list holds the first
    /// page alone (rows that only later pages brought are removed) and
    /// paging goes on from there. A call while a refresh runs waits for it.
    public func refresh() async {
        await startRefresh().value
    }

    /// Returns when the first page that making the results started (by
    /// their policy) has landed or failed; at once when none was started.
    ///
    /// For example, a command-line tool that prints the list once:
    ///
    /// ```swift
    /// let items = try controller.pagedResults(for: Item.order(Column("rank")), pages: ItemPages())
    /// await items.waitForInitialLoad()
    /// try items.results.performFetch()
    /// print(items.fetchedObjects)
    /// ```
    public func waitForInitialLoad() async {
        await initialLoad?.value
    }

    /// Starts a refresh, or returns the one running: synchronously, so a
    /// refresh asked for right after this call joins it.
    @discardableResult
    func startRefresh() -> Task<Void, Never> {
        if let refreshTask { return refreshTask }
        let task = Task { @MainActor in
            await self.run(index: 0, position: self.firstPage)
            self.refreshTask = nil
        }
        refreshTask = task
        return task
    }

    // MARK: - Private

    private func run(index: Int, position: PagePosition) async {
        loads += 1
        isLoadingPage = true
        let watcher = watchWaiting()
        defer { watcher.cancel() }
        do throws(DepotError) {
            try await load(index, position)
            if index == 0 { ended = false }
            pageError = nil
            if held {
                held = false
                results.reveal()
            }
        } catch {
            switch error.code {
            case .cancelled:
                // A refresh landed while this page loaded (or it was cancelled):
                // nothing was written, and nothing went wrong with the list.
                break
            case .invalidPage:
                ended = true
                pageError = error
            default:
                pageError = error
            }
        }
        if let state = readState() { apply(state) }
        // The first page's status shows this load's outcome as soon as this returns.
        if index == 0 { await results.syncStatus?.reload() }
        loads -= 1
        isLoadingPage = loads > 0
    }

    /// Offline, a page operation that waits for the network says so at once.
    private func watchWaiting() -> Task<Void, Never> {
        let stream = events()
        let name = operationName
        return Task { [weak self] in
            for await event in stream where event.operation == name && event.kind == .waitingForNetwork {
                if let error = event.error { self?.pageError = error }
            }
        }
    }

    private func readState() -> PagingTable.State? {
        let key = pagingKey
        return try? store.writer.read { db in try PagingTable.state(for: key, in: db) }
    }

    private func apply(_ state: PagingTable.State) {
        let more = state.hasMore && !ended
        if hasMore != more { hasMore = more }
        if pageCount != state.pageCount { pageCount = state.pageCount }
        if nextPage != state.next { nextPage = state.next }
    }

    /// Follows the paging state, also when something else writes it (the
    /// first page's sync status refreshing on its own, another operation).
    private func watchState() {
        let key = pagingKey
        let id = store.fanout.makeID()
        stateWatch = id
        store.fanout.watch(id, region: { db in
            try Table(PagingTable.pages).databaseRegion(db).union(Table(PagingTable.items).databaseRegion(db))
        }, fetch: { db in
            try PagingTable.state(for: key, in: db)
        }, apply: { [weak self] state in
            self?.apply(state)
        })
    }
}

extension DepotError {
    /// A copy with `detail` set when it had none.
    func withDetail(_ detail: String) -> DepotError {
        var copy = self
        if copy.detail == nil { copy.detail = detail }
        return copy
    }
}
