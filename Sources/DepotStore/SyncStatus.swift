import Depot
import Foundation
import GRDB
import Observation

/// A sync status's states: the current one when ``SyncStatus/updates()`` was
/// called, then each change.
public typealias SyncStatusUpdates = DepotStream<SyncStatus.State>

/// Whether a cached resource is syncing, when it last synced, and the last error:
/// the design's model-instigated sync with observable properties.
///
/// `lastSynced` and `lastError` come from the ``SyncLedger`` in the database, so
/// after a cold start with no network the status still says "last synced at T".
/// Any write to the ledger (by this status or by an operation enqueued elsewhere)
/// shows up here.
///
/// Use it from SwiftUI (it is `@Observable`), or as an AsyncSequence:
///
/// ```swift
/// List(results.fetchedObjects) { ... }
///     .refreshable { await status.refresh() }
///     .overlay(alignment: .bottom) {
///         if status.lastError != nil, let lastSynced = status.lastSynced {
///             Text("Offline — showing data from \(lastSynced.formatted())")
///         }
///     }
///
/// for await state in status.updates() { print(state) }
/// ```
@MainActor
@Observable
public final class SyncStatus {
    /// The resource key in the ledger.
    public let key: String
    /// Whether a refresh is running.
    public private(set) var isSyncing = false
    /// When data last arrived or was confirmed fresh.
    public private(set) var lastSynced: Date?
    /// The last failure, cleared by the next success.
    public private(set) var lastError: SyncError?
    /// Whether the resource was invalidated (``SyncLedger/invalidate(_:)``)
    /// and has not synced since.
    public private(set) var isStale = false
    /// When a refresh goes to the network: ``refresh(force:)`` and
    /// ``autoRefresh(every:onReconnect:)`` honour it.
    public let policy: CachePolicy
    /// What the ``LiveFeed`` of this key is doing: live, catching up (with
    /// the count so far), up to date or offline; `nil` for a resource that
    /// is not a feed's.
    public internal(set) var live: LiveState? { didSet { if live != oldValue { publish() } } }
    /// How many events of the feed's stream could not be processed and were
    /// skipped since this status was made; the last one's error is in ``lastError``.
    public internal(set) var skippedEvents = 0

    /// The values at once.
    public var state: State { State(isSyncing: isSyncing, lastSynced: lastSynced, lastError: lastError, isStale: isStale, live: live, skippedEvents: skippedEvents) }

    /// A sync status at one moment.
    public struct State: Sendable, Hashable {
        /// Whether a refresh is running.
        public var isSyncing: Bool
        /// When data last arrived or was confirmed fresh.
        public var lastSynced: Date?
        /// The last failure, cleared by the next success.
        public var lastError: SyncError?
        /// Whether the resource was invalidated and has not synced since.
        public var isStale: Bool
        /// What the feed of this key is doing, if it is a feed's.
        public var live: LiveState?
        /// Events of the feed's stream skipped because they could not be processed.
        public var skippedEvents: Int

        /// Makes a state (for previews and tests).
        public init(isSyncing: Bool, lastSynced: Date?, lastError: SyncError?, isStale: Bool = false, live: LiveState? = nil, skippedEvents: Int = 0) {
            self.isSyncing = isSyncing
            self.lastSynced = lastSynced
            self.lastError = lastError
            self.isStale = isStale
            self.live = live
            self.skippedEvents = skippedEvents
        }
    }

    @ObservationIgnored private let store: Store
    @ObservationIgnored private let perform: @Sendable (_ onWaiting: @escaping @Sendable (DepotError) -> Void) async throws(DepotError) -> Void
    @ObservationIgnored private let clock: any Clock<Duration>
    @ObservationIgnored private var events: (@Sendable () -> NetworkEvents)?
    @ObservationIgnored private var reconnectTask: Task<Void, Never>?
    @ObservationIgnored private var running: Task<Void, Never>?
    /// This status's client of the store's ``CommitFanout``, which follows its ledger entry.
    @ObservationIgnored private var ledgerWatch: UInt64?
    @ObservationIgnored private var autoRefreshTask: Task<Void, Never>?
    @ObservationIgnored private var continuations: [UUID: AsyncStream<State>.Continuation] = [:]
    @ObservationIgnored private(set) var refreshCount = 0
    /// The ledger's invalidation count last acted on.
    @ObservationIgnored private var seenInvalidations = 0
    /// An invalidation arrived while a refresh ran: refresh once more after it.
    @ObservationIgnored private var refreshesAgain = false
    /// The stored value is a miss (``markStale()``): stale, and needing a
    /// refresh under every policy but `.cacheOnly`, until a sync succeeds.
    @ObservationIgnored private var isMiss = false
    /// Invalidations this status wrote itself and has not seen in the ledger
    /// yet: they refresh nothing by themselves.
    @ObservationIgnored private var ownInvalidations = 0
    /// The write of ``markStale()``'s mark: a refresh waits for it, so that
    /// its sync clears the mark instead of coming before it.
    @ObservationIgnored private var marking: Task<Void, Never>?
    /// The ledger entry last read: the policy decides by it.
    @ObservationIgnored private var entry: SyncLedger.Entry?
    /// The last refresh's failure when the ledger could not record it (a
    /// full disk): shown over the ledger's entry until the next refresh ends.
    @ObservationIgnored private var unrecordedError: SyncError?

    /// Makes a status for `operation` as run by `controller`.
    ///
    /// For example:
    ///
    /// ```swift
    /// let status = try SyncStatus(refreshing: FetchTopSongs(), with: controller, policy: .cacheFirst(maxAge: .seconds(300)))
    /// await status.refresh()
    /// ```
    ///
    /// - Parameters:
    ///   - operation: The operation a refresh performs.
    ///   - controller: The controller that performs it; its store holds the ledger.
    ///   - policy: When a refresh goes to the network. Default: `.cacheThenNetwork`, always.
    public convenience init<Operation: CachingOperation>(refreshing operation: Operation, with controller: NetworkController, policy: CachePolicy = .cacheThenNetwork) throws(DepotError) {
        let store = try controller.requireStore()
        let name = operation.name
        self.init(key: operation.cacheKey, store: store, clock: controller.configuration.environment.clock, policy: policy) { onWaiting async throws(DepotError) in
            // Offline, a GET waits in the queue instead of failing: say so meanwhile.
            let events = controller.events()
            let watcher = Task {
                for await event in events where event.operation == name {
                    if event.kind == .waitingForNetwork, let error = event.error { onWaiting(error) }
                }
            }
            defer { watcher.cancel() }
            _ = try await controller.perform(operation)
        }
        events = { controller.events() }
    }

    init(
        key: String,
        store: Store,
        clock: any Clock<Duration>,
        policy: CachePolicy = .cacheThenNetwork,
        events: (@Sendable () -> NetworkEvents)? = nil,
        perform: @escaping @Sendable (_ onWaiting: @escaping @Sendable (DepotError) -> Void) async throws(DepotError) -> Void
    ) {
        self.key = key
        self.store = store
        self.clock = clock
        self.policy = policy
        self.events = events
        self.perform = perform
        // Read synchronously: the first frame already says "last synced at T".
        let entry = try? store.writer.read { db in try SyncLedger.entry(for: key, in: db) }
        // Invalidations from before this status existed show as `isStale`; the
        // results' policy decides about those. Only later ones refresh by themselves.
        seenInvalidations = entry?.invalidations ?? 0
        apply(entry)
        watchLedger()
    }

    /// Whether ``refresh(force:)`` would go to the network now: always,
    /// unless the policy is `.cacheOnly`, `.cacheFirst(maxAge:)` with a
    /// sync younger than `maxAge`, or `.cacheFirst` with a response still
    /// fresh by its headers, and no invalidation since. A sync stamped in
    /// the future (the clock was set back) needs a refresh.
    public var needsRefresh: Bool {
        refreshNeed != .notNeeded
    }

    /// What the policy asks for now.
    private var refreshNeed: CacheRefresh {
        if isMiss, policy != .cacheOnly { return .needed }
        return policy.refresh(for: entry, now: store.currentDate())
    }

    isolated deinit {
        running?.cancel()
        if let ledgerWatch { store.fanout.remove(ledgerWatch) }
        autoRefreshTask?.cancel()
        reconnectTask?.cancel()
        for continuation in continuations.values { continuation.finish() }
    }

    /// Refreshes as the ``policy`` says, and returns when the refresh is
    /// over. A failure lands in ``lastError``; it is not thrown. If a refresh
    /// is already running, this waits for that one instead of starting another.
    ///
    /// With `.cacheFirst(maxAge:)` a cache younger than `maxAge` that was not
    /// invalidated is not fetched again (pass `force` for a pull-to-refresh,
    /// where the user asked); `.cacheOnly` fetches only when forced. With
    /// `.cacheFirst`, a response fresh by its headers is not fetched again,
    /// and one within its `stale-while-revalidate` window is refreshed in the
    /// background: this starts the refresh (unless one runs) and returns at once.
    ///
    /// Offline, a GET refresh waits for the network (``/Depot/OfflineBehavior``):
    /// ``isSyncing`` stays `true`, ``lastError`` says `.offline` at once, and
    /// the refresh completes when the network is back.
    ///
    /// - Parameter force: Go to the network whatever the policy says.
    public func refresh(force: Bool = false) async {
        let need = force ? .needed : refreshNeed
        if need == .inBackground {
            // Stale, but the server lets the cached rows do while it revalidates.
            if running == nil { startRefresh() }
            return
        }
        if let running { return await running.value }
        guard need == .needed else { return }
        await startRefresh().value
    }

    /// Starts a refresh: ``isSyncing`` is `true` from now until it ends.
    @discardableResult
    private func startRefresh() -> Task<Void, Never> {
        setSyncing(true)
        let task = Task { @MainActor in
            await self.marking?.value
            var failure: DepotError?
            var recorded = true
            let store = self.store
            let key = self.key
            do throws(DepotError) {
                try await self.perform { error in
                    // The refresh waits for the network: the error shows now, and
                    // is kept in the ledger until a sync succeeds.
                    Task { await store.ledger.recordFailure(error, for: key) }
                }
            } catch {
                failure = error
                if error.code != .cancelled { recorded = await self.store.ledger.recordedFailure(error, for: self.key) }
            }
            // A failure the ledger could not take (a full disk, a file another
            // process holds) still shows, until the next refresh ends.
            if let failure, failure.code != .cancelled, !recorded {
                self.unrecordedError = SyncError(failure, date: self.store.currentDate())
            } else {
                self.unrecordedError = nil
            }
            if failure == nil { self.isMiss = false }
            // Read back what the operation (or the failure) wrote, so the caller
            // sees it as soon as this returns.
            if let entry = try? await self.store.ledger.entry(for: self.key) {
                self.apply(entry)
            } else if let failure, failure.code != .cancelled {
                self.lastError = SyncError(failure, date: self.store.currentDate())
            }
            self.refreshCount += 1
            self.running = nil
            self.setSyncing(false)
            if self.refreshesAgain {
                // Invalidated while this refresh ran: what it fetched may be
                // older than the change, so fetch once more.
                self.refreshesAgain = false
                Task { @MainActor in await self.refresh(force: true) }
            }
        }
        running = task
        return task
    }

    /// Refreshes every `interval` on the controller's clock, and as soon as the
    /// network comes back after being offline, until the status is released or
    /// ``stopAutoRefresh()`` is called. The first timed refresh comes after one
    /// interval. Each one honours the ``policy``: with `.cacheFirst(maxAge:)`,
    /// a tick finds a young cache enough and fetches nothing.
    ///
    /// - Parameters:
    ///   - interval: Time between refreshes.
    ///   - onReconnect: Whether to refresh when the controller's quality leaves `.offline`.
    public func autoRefresh(every interval: Duration, onReconnect: Bool = true) {
        autoRefreshTask?.cancel()
        reconnectTask?.cancel()
        reconnectTask = nil
        if onReconnect, let events {
            let stream = events()
            reconnectTask = Task { [weak self] in
                for await event in stream {
                    guard event.kind == .qualityChanged, event.previousQuality == .offline else { continue }
                    guard let self else { return }
                    await self.refresh()
                }
            }
        }
        let clock = clock
        autoRefreshTask = Task { [weak self] in
            while !Task.isCancelled {
                do {
                    try await clock.sleep(for: interval)
                } catch {
                    return
                }
                guard let self else { return }
                await self.refresh()
            }
        }
    }

    /// Reads the ledger now and shows what it says. Observation brings every
    /// ledger change shortly anyway; call this when something else wrote this
    /// key (a paged list's first page, say) and the next line must see it.
    ///
    /// For example:
    ///
    /// ```swift
    /// await timeline.refresh()      // a PagedResults whose first page has this key
    /// await status.reload()
    /// print(status.state.lastError ?? "synced")
    /// ```
    public func reload() async {
        do {
            apply(try await store.ledger.entry(for: key))
        } catch {
            // The store is closed: keep the last known state.
        }
    }

    /// Stops ``autoRefresh(every:onReconnect:)``.
    public func stopAutoRefresh() {
        autoRefreshTask?.cancel()
        autoRefreshTask = nil
        reconnectTask?.cancel()
        reconnectTask = nil
    }

    /// The current state at once, then each change, until iteration is cancelled
    /// or the status is released.
    public func updates() -> SyncStatusUpdates {
        let (stream, continuation) = AsyncStream<State>.makeStream()
        let id = UUID()
        continuation.yield(state)
        continuations[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { @MainActor in self?.continuations[id] = nil }
        }
        return DepotStream(stream)
    }

    // MARK: - Private

    private func setSyncing(_ value: Bool) {
        guard isSyncing != value else { return }
        isSyncing = value
        publish()
    }

    /// Records an event the feed's stream skipped.
    func noteSkipped(_ error: DepotError) {
        skippedEvents += 1
        lastError = SyncError(error, date: store.currentDate())
        publish()
    }

    private func apply(_ entry: SyncLedger.Entry?) {
        self.entry = entry
        if let entry, entry.invalidations > seenInvalidations {
            let new = entry.invalidations - seenInvalidations
            let own = min(new, ownInvalidations)
            ownInvalidations -= own
            seenInvalidations = entry.invalidations
            if new > own { refreshAfterInvalidation() }
        }
        let synced = entry?.lastSynced
        // A skipped event's error stays until the ledger records another one.
        let error = unrecordedError ?? entry?.lastError ?? (skippedEvents > 0 ? lastError : nil)
        let stale = (entry?.isStale ?? false) || isMiss
        guard synced != lastSynced || error != lastError || stale != isStale else { return }
        lastSynced = synced
        lastError = error
        isStale = stale
        publish()
    }

    /// Marks the key stale in the ledger, from a task, not on the main
    /// thread: the stored value is a miss (it no longer decodes, or the
    /// ledger's sync left none). The status is stale at once, and needs a
    /// refresh under every policy but `.cacheOnly` until a sync succeeds; a
    /// refresh waits for the mark, and the mark refreshes nothing by itself.
    func markStale() {
        isMiss = true
        ownInvalidations += 1
        apply(entry)
        let (store, key, previous) = (store, key, marking)
        marking = Task { @MainActor in
            await previous?.value
            do {
                _ = try await store.write { db in try SyncLedger.invalidate([.key(key)], in: db) }
            } catch {
                // Not written (a full disk): the miss still needs its refresh.
                self.ownInvalidations -= 1
            }
            if let entry = try? await store.ledger.entry(for: key) { self.apply(entry) }
        }
    }

    /// The resource was invalidated while this status lives (its results are
    /// on screen): refresh now, or after the refresh that is running. However
    /// many invalidations arrive meanwhile, that is one refresh.
    private func refreshAfterInvalidation() {
        guard policy != .cacheOnly else { return }
        if running != nil {
            refreshesAgain = true
        } else {
            Task { @MainActor in await self.refresh(force: true) }
        }
    }

    private func publish() {
        let state = state
        for continuation in continuations.values { continuation.yield(state) }
    }

    private func watchLedger() {
        let key = key
        let id = store.fanout.makeID()
        ledgerWatch = id
        store.fanout.watch(id, region: { db in try Table(SyncLedger.tableName).databaseRegion(db) }, fetch: { db in
            try SyncLedger.entry(for: key, in: db)
        }, apply: { [weak self] entry in
            self?.apply(entry)
        })
    }
}

extension NetworkController {
    /// The configured store, or a `.storage` error that says so in one sentence.
    func requireStore() throws(DepotError) -> Store {
        guard let store = configuration.store else {
            throw DepotError(.storage, detail: "this controller has no store: set Configuration.store to the Store that results and sync statuses read before making the controller")
        }
        return store
    }
}
