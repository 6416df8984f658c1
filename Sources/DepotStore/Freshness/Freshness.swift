import Depot
import Foundation

/// How long a response may be used without asking the server again, as its
/// headers say, fixed when it arrived: what ``CachePolicy/cacheFirst`` reads
/// back from the ``SyncLedger``.
///
/// The rules (RFC 9111 §4.2, for a private cache):
///
/// - `Cache-Control: max-age=N`: fresh until the receive time + N − `Age`.
/// - `Expires`, only without `max-age`: its lifetime is `Expires` − `Date`,
///   both on the server's clock, counted from the local receive time, so a
///   device clock that disagrees with the server's shifts nothing. Without a
///   `Date`, `Expires` is compared with the receive time. An `Expires` that
///   is not an HTTP date (`0`, `-1`) means already expired.
/// - `no-cache`: stale at once; the validators are kept, so the next refresh
///   is conditional and an unchanged resource costs a 304.
/// - `no-store`: never fresh, and no validators are kept, so every refresh
///   is a full request. The rows are still written: they are the app's data,
///   what it shows offline, not a copy of the response.
/// - `stale-while-revalidate=N` (without `no-cache` or `must-revalidate`):
///   for N s past freshness the cached rows are good enough to show while a
///   refresh runs in the background.
/// - No `max-age`, `no-cache`, `no-store` or `Expires`: no freshness at all
///   (no heuristic freshness): stale at once.
///
/// A 304 computes its freshness from its own headers, which RFC 9110 §15.4.5
/// asks the server to repeat there.
///
/// For example:
///
/// ```swift
/// let freshness = Freshness(["Cache-Control": "max-age=60", "Age": "10"], receivedAt: now)
/// freshness.freshUntil    // now + 50 s
/// ```
struct Freshness: Sendable, Hashable {
    /// Until when the response is fresh; `nil` when its headers say nothing
    /// about freshness, or say `no-store`.
    var freshUntil: Date?
    /// Until when, past ``freshUntil``, it may be shown while it is
    /// revalidated in the background; `nil` for no such window.
    var staleWhileRevalidateUntil: Date?
    /// Whether its validators may be kept for conditional requests (not after `no-store`).
    var keepsValidators = true

    /// The freshness of a response with `headers` that arrived at `receivedAt`
    /// (the local clock).
    init(_ headers: HeaderFields, receivedAt: Date) {
        let directives = CacheControl(headers)
        guard !directives.noStore else {
            keepsValidators = false
            return
        }
        let lifetime: TimeInterval
        if directives.noCache {
            lifetime = 0
        } else if let maxAge = directives.maxAge {
            lifetime = TimeInterval(maxAge)
        } else if let expires = headers.values(for: "Expires").first {
            lifetime = Self.lifetime(expires: expires, date: headers["Date"], receivedAt: receivedAt)
        } else {
            return
        }
        // Age is what the response had already spent in caches on the way;
        // a no-cache response is stale from the moment it arrived whatever it says.
        let age = directives.noCache ? 0 : Self.age(headers)
        let staleAt = receivedAt.addingTimeInterval(lifetime - age)
        freshUntil = staleAt
        if let window = directives.staleWhileRevalidate, window > 0, !directives.noCache, !directives.mustRevalidate {
            staleWhileRevalidateUntil = staleAt.addingTimeInterval(TimeInterval(window))
        }
    }

    /// The lifetime `Expires` gives: `Expires` − `Date` when the server sent a
    /// valid `Date`, otherwise `Expires` − `receivedAt`; zero when `Expires`
    /// is not an HTTP date or already past.
    static func lifetime(expires: String, date: String?, receivedAt: Date) -> TimeInterval {
        guard let expiresAt = RetryAfter.httpDate(expires.trimmingCharacters(in: .whitespaces), now: receivedAt) else { return 0 }
        let base = date.flatMap { RetryAfter.httpDate($0.trimmingCharacters(in: .whitespaces), now: receivedAt) } ?? receivedAt
        return max(0, expiresAt.timeIntervalSince(base))
    }

    /// The `Age` header in seconds: the largest valid value if there are
    /// several, zero if there is none.
    static func age(_ headers: HeaderFields) -> TimeInterval {
        let values = headers.values(for: "Age").flatMap { $0.split(separator: ",") }
        let seconds = values.compactMap { CacheControl.deltaSeconds($0.trimmingCharacters(in: .whitespaces)) }
        return TimeInterval(seconds.max() ?? 0)
    }
}
