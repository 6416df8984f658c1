import Foundation

/// What a ``CachePolicy`` asks of a refresh, for one ledger entry at one moment.
enum CacheRefresh: Sendable, Hashable {
    /// The cache is fresh: no request.
    case notNeeded
    /// Stale within its `stale-while-revalidate` window: refresh, but a reader
    /// need not wait for it.
    case inBackground
    /// Refresh, and a reader that wants fresh data waits for it.
    case needed
}

extension CachePolicy {
    /// What a resource whose ledger entry is `entry` (`nil`: never synced)
    /// needs at `now`.
    func refresh(for entry: SyncLedger.Entry?, now: Date) -> CacheRefresh {
        switch kind {
        case .cacheOnly:
            return .notNeeded
        case .cacheThenNetwork, .networkOnly:
            return .needed
        case .cacheFirst(let maxAge):
            // Never synced, invalidated, or synced "in the future": the clock
            // was set back since, so the age means nothing and the cache is stale.
            guard let entry, let lastSynced = entry.lastSynced, !entry.isStale, lastSynced <= now else { return .needed }
            if let maxAge {
                let (seconds, attoseconds) = maxAge.components
                let age = now.timeIntervalSince(lastSynced)
                return age > Double(seconds) + Double(attoseconds) / 1e18 ? .needed : .notNeeded
            }
            if let freshUntil = entry.freshUntil, now < freshUntil { return .notNeeded }
            if let window = entry.staleWhileRevalidateUntil, now < window { return .inBackground }
            return .needed
        }
    }
}
