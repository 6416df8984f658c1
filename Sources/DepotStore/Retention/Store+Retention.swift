import Depot
import Foundation

extension Store {
    /// Evicts now what the store's ``Retention`` no longer keeps, after any
    /// eviction under way, in batches of one write transaction each.
    ///
    /// Eviction also runs on its own: when the store opens and after syncs.
    /// Call this where the app knows a good moment (going to the background,
    /// after the user cleared a filter), or in tests.
    ///
    /// For example:
    ///
    /// ```swift
    /// let report = try await store.evict()
    /// print(report)   // "evicted 1200 rows (feedItem 1200) in 3 batches"
    /// ```
    ///
    /// - Returns: What was evicted; empty when the store has no retention.
    /// - Throws: `.storage` if a policy no longer fits the schema or a batch fails
    ///   (the batches before it stay evicted).
    public func evict() async throws(DepotError) -> EvictionReport {
        guard let evictor else { return EvictionReport() }
        return try await evictor.evict(self)
    }

    /// Schedules an eviction a moment from now (``Retention/defaultDelay``);
    /// calls before it starts join it. Returns at once: a sync that calls it
    /// completes without waiting.
    func scheduleEviction() {
        evictor?.schedule(self, after: evictor?.retention.delay ?? .zero)
    }

    /// Returns when no eviction waits or runs: for tests.
    func evictionIdle() async {
        await evictor?.idle()
    }
}
