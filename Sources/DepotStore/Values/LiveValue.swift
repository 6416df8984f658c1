import Depot
import Foundation
import GRDB
import Observation

/// A cached value on screen: what a ``CachedValueOperation`` last stored
/// under its key, kept fresh by policy, updated at every commit that
/// writes, changes or removes it.
///
/// Make one with ``Depot/NetworkController/value(for:policy:)``. Like a
/// ``ResultsController``, it is consumed three ways:
///
/// ```swift
/// let songs = try controller.value(for: FetchTopSongs(), policy: .cacheFirst(maxAge: .seconds(300)))
///
/// // 1. @Observable: SwiftUI reads `songs.value` and redraws when it changes.
/// // 2. A callback, at once and at each change:
/// let observation = songs.start { value in render(value ?? []) }
/// // 3. An AsyncSequence:
/// for await value in songs.updates() { render(value ?? []) }
/// ```
///
/// A cold start offline shows the last value at once. Before the first
/// sync, and when the stored value no longer decodes (``error`` says why),
/// ``value`` is `nil`.
@MainActor
@Observable
public final class LiveValue<Value: Codable & Sendable> {
    /// The cached value, or `nil` before the first sync, after eviction, or
    /// when the stored value no longer decodes.
    public private(set) var value: Value?
    /// Why the stored value is not shown: it no longer decodes as `Value`
    /// (its type changed between app versions; it is refetched), or
    /// observation failed. `nil` while all is well.
    public private(set) var error: DepotError?
    /// The sync status of the value's key: `isSyncing`, `lastSynced`,
    /// `lastError`, `refresh()`.
    public let syncStatus: SyncStatus

    @ObservationIgnored private let results: ResultsController<StoredValue<Value>>
    @ObservationIgnored private var observation: ResultsObservation?
    @ObservationIgnored private var subscribers: [UUID: Subscriber] = [:]

    private struct Subscriber {
        var onChange: @MainActor (Value?) -> Void
        var finish: @MainActor () -> Void = {}
    }

    init(results: ResultsController<StoredValue<Value>>, syncStatus: SyncStatus) {
        self.results = results
        self.syncStatus = syncStatus
        observation = results.start(
            onError: { [weak self] error in self?.error = error },
            onChange: { [weak self] update in self?.show(update.snapshot.fetchedObjects.first) })
    }

    private func show(_ stored: StoredValue<Value>?) {
        switch stored?.value {
        case .success(let decoded):
            value = decoded
            error = nil
        case .failure(let failure):
            value = nil
            error = failure
        case nil:
            value = nil
            error = nil
        }
        for subscriber in subscribers.values { subscriber.onChange(value) }
    }

    /// Calls `onChange` with the current value at once, then at each change,
    /// on the main actor, until the returned observation is cancelled or
    /// released. After `cancel()` returns, no call comes.
    public func start(onChange: @escaping @MainActor (Value?) -> Void) -> ResultsObservation {
        let id = UUID()
        let observation = ResultsObservation { [weak self] in
            Task { @MainActor in self?.subscribers[id] = nil }
        }
        subscribers[id] = Subscriber(onChange: { [weak observation] value in
            guard let observation, !observation.isCancelled else { return }
            onChange(value)
        })
        onChange(value)
        return observation
    }

    /// The current value, then the value after each change, as an
    /// AsyncSequence. The sequence ends when its iteration is cancelled or
    /// the live value is released.
    public func updates() -> LiveValueUpdates<Value> {
        let (stream, continuation) = AsyncStream<Value?>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let id = UUID()
        continuation.yield(value)
        subscribers[id] = Subscriber(onChange: { continuation.yield($0) }, finish: { continuation.finish() })
        continuation.onTermination = { [weak self] _ in
            Task { @MainActor in self?.subscribers[id] = nil }
        }
        return DepotStream(stream)
    }

    isolated deinit {
        for subscriber in subscribers.values { subscriber.finish() }
    }
}

/// A live value's values, from ``LiveValue/updates()``.
public typealias LiveValueUpdates<Value: Sendable> = DepotStream<Value?>

extension NetworkController {
    /// The value `operation` caches, live, kept fresh according to `policy`:
    /// the light path's `useQuery(key, fetcher)`.
    ///
    /// The value shows what is cached at once; the refresh runs in the
    /// background, its progress and errors in ``LiveValue/syncStatus``. A
    /// stored value that no longer decodes is a miss, and so is a key that
    /// the ledger calls synced but that holds no value (a key the table path
    /// cached in an earlier version): the key is marked stale, so every
    /// policy but `.cacheOnly` refetches it, whole.
    ///
    /// ```swift
    /// let profile = try controller.value(for: FetchProfile(), policy: .cacheFirst(maxAge: .seconds(600)))
    /// ```
    ///
    /// - Parameters:
    ///   - operation: The operation that fetches and caches the value.
    ///   - policy: When to go to the network. Default: `.cacheThenNetwork`.
    /// - Throws: `.storage` if no store is configured or the first read fails.
    @MainActor
    public func value<Operation: CachedValueOperation>(
        for operation: Operation,
        policy: CachePolicy = .cacheThenNetwork
    ) throws(DepotError) -> LiveValue<Operation.Value> {
        let store = try requireStore()
        let key = operation.cacheKey
        let request = StoredValue<Operation.Value>.request(key: key, version: Operation.valueVersion)
        // A miss the ledger does not know of is made stale, so that the
        // policy refetches it: a value that no longer decodes, or none under a
        // key the ledger calls synced (the table path cached it before).
        let stored: StoredValue<Operation.Value>?
        let isUnknownMiss: Bool
        do {
            (stored, isUnknownMiss) = try store.writer.read { db in
                let stored = try request.fetchOne(db)
                switch stored?.value {
                case .success: return (stored, false)
                case .failure: return (stored, true)
                case nil:
                    guard let entry = try SyncLedger.entry(for: key, in: db) else { return (nil, false) }
                    return (nil, entry.lastSynced != nil && !entry.isStale)
                }
            }
        } catch {
            throw DepotError.storage(error, detail: "cannot read the cached value of \(key)")
        }
        // The row just read is the results' first snapshot: a second fetch
        // would decode the whole value again on the main actor.
        let results = try makeResults(
            query: ResultsQuery(request),
            refresh: ResultsDiff.refresh(sectionKey: nil),
            operation: operation,
            policy: policy,
            firstRows: stored.map { [$0] } ?? [],
            refreshes: !isUnknownMiss)
        guard let status = results.syncStatus else {
            throw DepotError(.storage, detail: "no sync status for \(operation.cacheKey)")
        }
        if isUnknownMiss {
            // Marked stale off the main actor: a write here would wait, on the
            // main thread, for the transaction the writer runs now (a big sync
            // takes seconds).
            status.markStale()
            if policy != .cacheOnly {
                results.refreshTask = Task { @MainActor in await status.refresh(force: true) }
            }
        }
        return LiveValue(results: results, syncStatus: status)
    }
}
