import Depot
import Foundation
import GRDB
import Observation
import Synchronization

/// Live, sectioned results of a database request that tell the view layer what
/// changed: Depot's NSFetchedResultsController.
///
/// A results controller fetches at once when it is made, so ``sections`` is
/// ready before the first frame. After each commit that touches what it
/// reads, it refetches off the main actor, computes a ``ResultsChangeSet`` by
/// identity in O(n), and delivers the new snapshot and the change set on the
/// main actor. Commits that arrive while a change is being computed are
/// coalesced into the next one. However many controllers a store has, a
/// commit costs one read and one turn of the main actor for all of them.
///
/// Consume it in one of three ways:
///
/// ```swift
/// // 1. SwiftUI: it is @Observable.
/// List(results.fetchedObjects) { song in Text(song.title) }
///
/// // 2. A callback, for table and collection views.
/// let observation = results.start { error in
///     show(error)
/// } onChange: { update in
///     guard let changes = update.changes else { return tableView.reloadData() }
///     tableView.performBatchUpdates { apply(changes) }
/// }
///
/// // 3. An AsyncSequence.
/// for await update in results.updates() { render(update.snapshot) }
/// ```
///
/// Records are matched by `id`, which must be unique in the results (a primary key).
@MainActor
@Observable
public final class ResultsController<Record: FetchableRecord & Identifiable & Equatable & Sendable> where Record.ID: Sendable {
    /// The current results.
    public private(set) var snapshot: ResultsSnapshot<Record>
    /// The change set that produced ``snapshot``, or `nil` before the first change.
    public private(set) var lastChanges: ResultsChangeSet?
    /// The error that stopped observation, if one did. The last snapshot stays.
    public private(set) var error: DepotError?
    /// The sync status of the resource these results show.
    ///
    /// Results made by ``Depot/NetworkController/results(for:sectionedBy:refreshing:policy:)``
    /// always have one. It is Optional because results made with
    /// ``init(store:request:sectionedBy:)`` read the cache only and sync nothing;
    /// bind it once where you make the results:
    ///
    /// ```swift
    /// let contacts = try controller.results(for: CachedContact.order(Column("name")), refreshing: FetchContacts())
    /// guard let status = contacts.syncStatus else { return }
    /// ```
    public internal(set) var syncStatus: SyncStatus?

    /// The sections of ``snapshot``.
    public var sections: [ResultsSection<Record>] { snapshot.sections }
    /// Every record of ``snapshot``, section after section.
    public var fetchedObjects: [Record] { snapshot.fetchedObjects }

    /// The refresh that `NetworkController.results(...)` started because its
    /// policy asked for one; `nil` when the cache was enough or no refresh was
    /// asked for. Tests await it, or check that it is `nil`, instead of guessing
    /// whether a background refresh has begun.
    @ObservationIgnored var refreshTask: Task<Void, Never>?
    /// For `.networkOnly`: waits for the first successful sync to show the rows.
    @ObservationIgnored var revealTask: Task<Void, Never>?

    @ObservationIgnored private let store: Store
    @ObservationIgnored private let query: ResultsQuery<Record>
    @ObservationIgnored private let refresh: ResultsDiff.Refresh<Record>
    /// Counts observations started; a change computed by a replaced one is dropped.
    @ObservationIgnored private var observationGeneration = 0
    @ObservationIgnored private var subscribers: [UUID: Subscriber] = [:]
    @ObservationIgnored private var delivered = 0
    /// This controller's entry in the store's ``LiveResults``, for retention.
    @ObservationIgnored private let referenceID: UInt64
    /// This controller's client of the store's ``CommitFanout``.
    @ObservationIgnored private let observerID: UInt64

    private struct Subscriber {
        var onChange: @MainActor (ResultsUpdate<Record>) -> Void
        var onError: @MainActor (DepotError) -> Void
        var finish: @MainActor () -> Void = {}
    }

    /// Makes a results controller and fetches its first snapshot at once.
    ///
    /// For example:
    ///
    /// ```swift
    /// let results = try ResultsController(
    ///     store: store,
    ///     request: Song.order(Column("genre"), Column("rank")),
    ///     sectionedBy: { $0.genre })
    /// ```
    ///
    /// - Parameters:
    ///   - store: The store to read.
    ///   - request: What to fetch, filtered and sorted (a GRDB request).
    ///   - sectionKey: The section name of a record; `nil` for one unnamed section.
    @inlinable
    public convenience init<Query: FetchRequest & Sendable>(
        store: Store,
        request: Query,
        sectionedBy sectionKey: (@Sendable (Record) -> String)? = nil
    ) throws(DepotError) where Query.RowDecoder == Record {
        // Inlinable so that fetching, snapshotting and diffing are specialized for Record.
        try self.init(store: store, query: ResultsQuery(request), refresh: ResultsDiff.refresh(sectionKey: sectionKey), held: false)
    }

    /// Makes a results controller. `held` ones show nothing until ``performFetch()``.
    /// `firstRows`, when the caller just fetched them with `query`, are the
    /// first snapshot instead of a fetch of its own: the first round of
    /// observation refetches anyway, so a commit since then still shows.
    @usableFromInline
    init(store: Store, query: ResultsQuery<Record>, refresh: @escaping ResultsDiff.Refresh<Record>, held: Bool, firstRows: [Record]? = nil) throws(DepotError) {
        self.store = store
        self.query = query
        self.refresh = refresh
        self.snapshot = .empty
        self.referenceID = store.liveResults.register()
        self.observerID = store.fanout.makeID()
        if !held {
            let rows: [Record]
            if let firstRows { rows = firstRows } else { rows = try read() }
            snapshot = refresh(rows, .empty).0
            publishReferences()
            observe(from: snapshot)
        }
    }

    isolated deinit {
        store.liveResults.remove(referenceID)
        store.fanout.remove(observerID)
        revealTask?.cancel()
        for subscriber in subscribers.values { subscriber.finish() }
    }

    /// Fetches now.
    private func read() throws(DepotError) -> [Record] {
        do {
            return try store.writer.read(query.fetch)
        } catch {
            store.noticeFailure(error)
            throw store.failure(error, detail: "fetch failed")
        }
    }

    /// Starts watching the database, diffing against `base`: the store's
    /// ``CommitFanout`` refetches after each commit that touches what the
    /// query reads.
    func observe(from base: ResultsSnapshot<Record>) {
        observationGeneration += 1
        let generation = observationGeneration
        let fetch = query.fetch
        let refresh = refresh
        // The snapshot the next change is computed against. A client is in
        // one round at a time, and a round delivers before the client's next
        // begins, so it is always the one this observation delivered last.
        let current = Current(base)
        store.fanout.watch(observerID, CommitFanout.Client(region: query.region) { [weak self] db in
            let rows = Result { try fetch(db) }
            let count = (try? rows.get().count) ?? 0
            return ({
                switch rows {
                case .failure(let error):
                    return { self?.fail(DepotError.storage(error, detail: "observation failed"), from: generation) }
                case .success(let rows):
                    let (next, changes) = refresh(rows, current.value.withLock { $0 })
                    guard !changes.isEmpty else { return nil }
                    return {
                        guard let self, self.deliver(next, changes: changes, from: generation) else { return }
                        current.value.withLock { $0 = next }
                    }
                }
            }, count)
        } fail: { [weak self] error in
            { self?.fail(error, from: generation) }
        }, rows: base.fetchedObjects.count)
    }

    /// Delivers a change computed by observation `generation`, unless a newer
    /// observation replaced it (``performFetch()`` did): that change set was
    /// computed against a snapshot that is no longer the current one, and the
    /// newer observation's first round brings what it missed.
    /// Returns whether the observation is still the current one.
    private func deliver(_ next: ResultsSnapshot<Record>, changes: ResultsChangeSet, from generation: Int) -> Bool {
        guard generation == observationGeneration else { return false }
        deliver(next, changes: changes)
        return true
    }

    /// Stops observation `generation` with `error`, if it is still the current one.
    private func fail(_ error: DepotError, from generation: Int) {
        guard generation == observationGeneration else { return }
        store.fanout.remove(observerID)
        fail(error)
    }

    /// Fetches now, synchronously, and delivers what changed since the last
    /// snapshot; observation goes on from there. Changes arrive on their own
    /// shortly after each commit, so call this only when the next line needs the
    /// rows a commit just wrote, as a command-line tool that prints and exits does.
    ///
    /// It also reveals results that `.networkOnly` held back.
    public func performFetch() throws(DepotError) {
        let rows: [Record]
        do {
            rows = try read()
        } catch {
            fail(error)
            throw error
        }
        let (next, changes) = refresh(rows, snapshot)
        if !changes.isEmpty { deliver(next, changes: changes) }
        observe(from: next)
    }

    /// Shows the rows held back by `.networkOnly`, now that the network answered.
    func reveal() {
        try? performFetch()
    }

    /// Tells retention which rows the current snapshot shows (a copy of the
    /// snapshot's reference; keys are read only when a policy asks).
    private func publishReferences() {
        guard let reader = LiveResults.reader(for: snapshot) else { return }
        store.liveResults.update(referenceID, table: reader.table, keys: reader.keys)
    }

    private func deliver(_ next: ResultsSnapshot<Record>, changes: ResultsChangeSet) {
        snapshot = next
        publishReferences()
        lastChanges = changes
        delivered += 1
        let update = ResultsUpdate(snapshot: next, changes: changes)
        for subscriber in subscribers.values { subscriber.onChange(update) }
    }

    private func fail(_ error: DepotError) {
        self.error = error
        for subscriber in subscribers.values { subscriber.onError(error) }
    }

    /// Calls `onChange` with the current snapshot at once (its `changes` is `nil`),
    /// then with each change, on the main actor, until the returned observation is
    /// cancelled or released.
    ///
    /// - Parameters:
    ///   - onError: Called if observation fails; the last snapshot stays.
    ///   - onChange: Called with each update.
    public func start(
        onError: @escaping @MainActor (DepotError) -> Void = { _ in },
        onChange: @escaping @MainActor (ResultsUpdate<Record>) -> Void
    ) -> ResultsObservation {
        let id = UUID()
        let observation = ResultsObservation { [weak self] in
            self?.subscribers[id] = nil
        }
        // Checked at each delivery: once `cancel()` returned on the main
        // actor, or the observation was released, no callback runs.
        subscribers[id] = Subscriber(
            onChange: { [weak observation] update in
                guard let observation, !observation.isCancelled else { return }
                onChange(update)
            },
            onError: { [weak observation] error in
                guard let observation, !observation.isCancelled else { return }
                onError(error)
            })
        onChange(ResultsUpdate(snapshot: snapshot, changes: nil))
        return observation
    }

    /// The current snapshot, then one update per change, as an AsyncSequence.
    ///
    /// Every change set is kept (none is dropped for a slow consumer), so applying
    /// them in order to the first snapshot always gives the latest. The sequence
    /// ends when its iteration is cancelled or the results controller is released.
    public func updates() -> ResultsUpdates<Record> {
        let (stream, continuation) = AsyncStream<ResultsUpdate<Record>>.makeStream()
        let id = UUID()
        continuation.yield(ResultsUpdate(snapshot: snapshot, changes: nil))
        subscribers[id] = Subscriber(
            onChange: { continuation.yield($0) },
            onError: { _ in continuation.finish() },
            finish: { continuation.finish() })
        continuation.onTermination = { [weak self] _ in
            Task { @MainActor in self?.subscribers[id] = nil }
        }
        return DepotStream(stream)
    }

    /// How many change sets have been delivered: handy in tests.
    var deliveredCount: Int { delivered }
}

/// The snapshot an observation computes its next change against.
private final class Current<Record: Sendable>: Sendable {
    let value: Mutex<ResultsSnapshot<Record>>

    init(_ snapshot: ResultsSnapshot<Record>) {
        value = Mutex(snapshot)
    }
}

/// A results controller's updates: its snapshot when ``ResultsController/updates()``
/// was called, then one update per change.
public typealias ResultsUpdates<Record: Sendable> = DepotStream<ResultsUpdate<Record>>

/// A snapshot and the change set that led to it (`nil` for the first one).
public struct ResultsUpdate<Record: Sendable>: Sendable {
    /// The results after the change.
    public var snapshot: ResultsSnapshot<Record>
    /// What changed since the previous update, or `nil` for the first update.
    public var changes: ResultsChangeSet?
}

/// A running observation of a ``ResultsController``. It stops when cancelled or
/// released.
///
/// Cancelling is synchronous, as with GRDB's cancellables: once ``cancel()``
/// returns on the main actor (or the observation is released), its callbacks
/// are not called again.
public final class ResultsObservation: Sendable {
    private struct State {
        var cancelled = false
        var onCancel: (@MainActor @Sendable () -> Void)?
    }

    private let state: Mutex<State>

    init(onCancel: @escaping @MainActor @Sendable () -> Void) {
        self.state = Mutex(State(onCancel: onCancel))
    }

    deinit { cancel() }

    /// Whether ``cancel()`` was called.
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Stops the observation: no callback runs after this returns on the main
    /// actor. Called from elsewhere, a delivery already under way on the main
    /// actor may still finish.
    public func cancel() {
        let onCancel = state.withLock { state in
            state.cancelled = true
            return state.onCancel.take()
        }
        guard let onCancel else { return }
        // The subscriber leaves its controller on the main actor: now if this is it.
        if Thread.isMainThread {
            MainActor.assumeIsolated { onCancel() }
        } else {
            Task { @MainActor in onCancel() }
        }
    }
}

/// What a results controller reads: its rows, and the region of the database
/// a commit must change to change them.
@usableFromInline
struct ResultsQuery<Record: Sendable>: Sendable {
    let fetch: @Sendable (Database) throws -> [Record]
    let region: @Sendable (Database) throws -> DatabaseRegion

    @inlinable
    init<Query: FetchRequest & Sendable>(_ request: Query) where Query.RowDecoder == Record, Record: FetchableRecord {
        self.init(fetch: { db in try request.fetchAll(db) }, region: { db in try request.databaseRegion(db) })
    }

    @usableFromInline
    init(fetch: @escaping @Sendable (Database) throws -> [Record], region: @escaping @Sendable (Database) throws -> DatabaseRegion) {
        self.fetch = fetch
        self.region = region
    }
}
