import Depot
import Foundation
import GRDB
import Observation
import Synchronization

/// Live, sectioned results of a database request that tell the view layer what
/// changed: Depot's NSFetchedResultsController.
///
/// A results controller fetches at once when it is made, so ``sections`` is
/// ready before the first frame. After each commit that touches the tables it
/// reads, it refetches off the main actor, computes a ``ResultsChangeSet`` by
/// identity in O(n), and delivers the new snapshot and the change set on the
/// main actor. Commits that arrive while a change is being computed are
/// coalesced into the next one.
///
/// Consume it in one of three ways, as with GRDB's `ValueObservation`:
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
    /// The sync status of the resource these results show, when they were made by
    /// ``Depot/NetworkController/results(for:sectionedBy:refreshing:policy:)``.
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
    @ObservationIgnored private let fetch: @Sendable (Database) throws -> [Record]
    @ObservationIgnored private let refresh: ResultsDiff.Refresh<Record>
    @ObservationIgnored private var observationTask: Task<Void, Never>?
    /// Counts observations started; a change computed by a replaced one is dropped.
    @ObservationIgnored private var observationGeneration = 0
    @ObservationIgnored private var subscribers: [UUID: Subscriber] = [:]
    @ObservationIgnored private var delivered = 0
    /// This controller's entry in the store's ``LiveResults``, for retention.
    @ObservationIgnored private let referenceID: UInt64

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
        try self.init(store: store, fetch: { db in try request.fetchAll(db) }, refresh: ResultsDiff.refresh(sectionKey: sectionKey), held: false)
    }

    /// Makes a results controller. `held` ones show nothing until ``performFetch()``.
    @usableFromInline
    init(store: Store, fetch: @escaping @Sendable (Database) throws -> [Record], refresh: @escaping ResultsDiff.Refresh<Record>, held: Bool) throws(DepotError) {
        self.store = store
        self.fetch = fetch
        self.refresh = refresh
        self.snapshot = .empty
        self.referenceID = store.liveResults.register()
        if !held {
            snapshot = refresh(try Self.read(store, fetch), .empty).0
            publishReferences()
            observe(from: snapshot)
        }
    }

    isolated deinit {
        store.liveResults.remove(referenceID)
        observationTask?.cancel()
        revealTask?.cancel()
        for subscriber in subscribers.values { subscriber.finish() }
    }

    private static func read(_ store: Store, _ fetch: @Sendable (Database) throws -> [Record]) throws(DepotError) -> [Record] {
        do {
            return try store.writer.read(fetch)
        } catch {
            throw DepotError.storage(error, detail: "fetch failed")
        }
    }

    /// Starts watching the database, diffing against `base`.
    func observe(from base: ResultsSnapshot<Record>) {
        observationTask?.cancel()
        observationGeneration += 1
        let generation = observationGeneration
        let observation = ValueObservation.tracking(fetch)
        let writer = store.writer
        let refresh = refresh
        // Handed over, not captured: a task keeps what its closure captured until
        // it ends, so a captured `base` (the first snapshot, every row of it) would
        // stay alive beside the current one for as long as the observation runs.
        let start = Handoff(base)
        observationTask = Task.detached(priority: .userInitiated) { [weak self] in
            guard var current = start.take() else { return }
            do {
                // Newest-only buffering is the coalescing: commits that land while a
                // change is computed or delivered collapse into the next fetch.
                for try await rows in observation.values(in: writer, bufferingPolicy: .bufferingNewest(1)) {
                    let (next, changes) = refresh(rows, current)
                    guard !changes.isEmpty else { continue }
                    current = next
                    guard let self, await self.deliver(next, changes: changes, from: generation) else { return }
                }
            } catch is CancellationError {
            } catch {
                await self?.fail(DepotError.storage(error, detail: "observation failed"), from: generation)
            }
        }
    }

    /// Delivers a change computed by observation `generation`, unless a newer
    /// observation replaced it (``performFetch()`` did): cancelling a task does
    /// not stop a delivery already waiting for the main actor, and that change
    /// set was computed against a snapshot that is no longer the current one.
    /// Returns whether the observation is still the current one.
    private func deliver(_ next: ResultsSnapshot<Record>, changes: ResultsChangeSet, from generation: Int) -> Bool {
        guard generation == observationGeneration else { return false }
        deliver(next, changes: changes)
        return true
    }

    private func fail(_ error: DepotError, from generation: Int) {
        guard generation == observationGeneration else { return }
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
            rows = try Self.read(store, fetch)
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
        subscribers[id] = Subscriber(onChange: onChange, onError: onError)
        onChange(ResultsUpdate(snapshot: snapshot, changes: nil))
        return ResultsObservation { [weak self] in
            self?.subscribers[id] = nil
        }
    }

    /// The current snapshot, then one update per change, as an AsyncSequence.
    ///
    /// Every change set is kept (none is dropped for a slow consumer), so applying
    /// them in order to the first snapshot always gives the latest. The sequence
    /// ends when its iteration is cancelled or the results controller is released.
    public func updates() -> AsyncStream<ResultsUpdate<Record>> {
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
        return stream
    }

    /// How many change sets have been delivered: handy in tests.
    var deliveredCount: Int { delivered }
}

/// A value handed to a task once: the task takes it out, so that nothing but
/// the task's own variable keeps it.
private final class Handoff<Value: Sendable>: Sendable {
    private let value: Mutex<Value?>

    init(_ value: Value) {
        self.value = Mutex(value)
    }

    func take() -> Value? {
        value.withLock { $0.take() }
    }
}

/// A snapshot and the change set that led to it (`nil` for the first one).
public struct ResultsUpdate<Record: Sendable>: Sendable {
    /// The results after the change.
    public var snapshot: ResultsSnapshot<Record>
    /// What changed since the previous update, or `nil` for the first update.
    public var changes: ResultsChangeSet?
}

/// A running observation of a ``ResultsController``. It stops when cancelled or
/// released.
public final class ResultsObservation: Sendable {
    private let onCancel: Mutex<(@MainActor @Sendable () -> Void)?>

    init(onCancel: @escaping @MainActor @Sendable () -> Void) {
        self.onCancel = Mutex(onCancel)
    }

    deinit { cancel() }

    /// Stops the observation.
    public func cancel() {
        guard let onCancel = onCancel.withLock({ $0.take() }) else { return }
        Task { @MainActor in onCancel() }
    }
}
