/// How delayable work (`.low` and below) is paced, so that its bytes do not
/// queue ahead of urgent work at the link's bottleneck.
///
/// A server writes a whole response into its socket at once. On a slow link
/// those bytes wait in the narrowest hop's queue (a router's buffer, `tbf`) and
/// in socket buffers, and a high-priority response queues behind every byte of
/// every low-priority transfer already under way, whatever the scheduler
/// does next. Pacing keeps those bytes near the bandwidth-delay product: a
/// delayable job starts only once the one before it has at most the budget's
/// bytes still to come (by `Content-Length` and the bytes received), which is
/// enough to keep the link busy while the next request makes its round trip.
/// Nor does a delayable job start while urgent work (`.high` and above)
/// runs: a transfer larger than what its connection sends at once would find
/// the new job's bytes queued ahead of its own later ones. Its own bytes keep
/// the link busy. Work at `.normal` is not waited for: small requests that
/// wait on round trips would leave the link idle. Nor is a job sleeping
/// out a long wait before its retry (a `Retry-After` of many seconds): it
/// sends nothing meanwhile, so delayable work runs until a margin before
/// the retry (five round trips, at least a second). A short sleep lends
/// nothing: what started in it would be in the retry's way.
///
/// The budget is `roundTrips` × the measured bandwidth × the minimum round
/// trip (``ConnectionMonitor``). Until the monitor has a bandwidth estimate,
/// each delayable job waits for the first bytes of the one before it, which
/// paces their starts by a round trip.
///
/// Pacing starts alone cannot take back a response already on its way: urgent
/// work that arrives while a 20 KB image streams in still waits behind all of
/// it. So a delayable `GET` is also fetched in byte ranges (RFC 9110 `Range`,
/// with `If-Range` so that the pieces are of one representation), and before
/// each range after the first it waits while urgent work runs. A range is
/// twice the budget (four bandwidth-delay products by default: a lone
/// download keeps about 80% of the link across the round trip between
/// ranges) and at least ``rangeBytes``; until the monitor has measured the
/// link, a download's first range is ``rangeBytes`` and each next one twice
/// the one before. The operation sees one `200` response
/// with the whole body. A server that ignores `Range` answers the first
/// request whole, as without ranges; one that answers `206` without an `ETag`
/// or `Last-Modified`, or with a `Content-Encoding`, is asked again without
/// `Range`, since such pieces cannot be joined safely. A representation that
/// changes between ranges fails the attempt with
/// ``DepotError/Code/connectionLost``, which the default retry policy retries.
///
/// For example:
///
/// ```swift
/// var configuration = NetworkController.Configuration(baseURL: base)
/// configuration.conditions.delayablePacing = .bandwidthDelay(roundTrips: 1)   // tighter than the default
/// configuration.conditions.delayablePacing = .bandwidthDelay(roundTrips: 2, rangeBytes: nil)   // whole responses
/// configuration.conditions.delayablePacing = .off                             // every delayable transfer starts at once
/// ```
public struct DelayablePacing: Sendable, Hashable {
    /// How many round trips of bytes the budget holds; `nil` when pacing is off.
    let roundTrips: Double?
    /// The smallest budget, in bytes.
    let minimumBytes: Int64
    /// The smallest byte range of a delayable download; `nil` fetches responses whole.
    public let rangeBytes: Int?

    /// No pacing: delayable jobs start whenever the scheduler has room for them,
    /// and their responses come whole.
    public static let off = DelayablePacing(roundTrips: nil, minimumBytes: 0, rangeBytes: nil)

    /// Two round trips of bytes: one for the next request's round trip, one
    /// for progress reported in chunks rather than byte by byte.
    public static let `default` = bandwidthDelay(roundTrips: defaultRoundTrips)

    /// The default's round trips.
    public static let defaultRoundTrips = 2.0

    /// The default's smallest range: 8 KB, so that urgent work that arrives
    /// while a delayable download runs waits behind at most that much of it
    /// (64 ms at 1 Mbit/s).
    public static let defaultRangeBytes = 8 * 1024

    /// A budget of `roundTrips` bandwidth-delay products, and at least `minimumBytes`.
    ///
    /// - Parameters:
    ///   - roundTrips: How many round trips' worth of bytes delayable work may
    ///     still have to come when the next delayable job starts (at least 0).
    ///   - minimumBytes: The smallest budget in bytes (0).
    ///   - rangeBytes: The smallest byte range a delayable `GET` is fetched in
    ///     (``defaultRangeBytes``, at least 1 KB); `nil` fetches responses whole.
    public static func bandwidthDelay(roundTrips: Double, minimumBytes: Int64 = 0, rangeBytes: Int? = defaultRangeBytes) -> DelayablePacing {
        DelayablePacing(roundTrips: max(0, roundTrips), minimumBytes: max(0, minimumBytes), rangeBytes: rangeBytes.map { max(1024, $0) })
    }

    /// Whether delayable jobs are paced.
    var isOn: Bool { roundTrips != nil }

    /// The budget in bytes for a link of `bandwidth` bits per second and
    /// `minimumRTT`; `nil` (no limit on bytes: each job waits only for the
    /// first bytes of the one before it) while either is unknown.
    func budget(bandwidth: Double?, minimumRTT: Duration?) -> Int64? {
        guard let roundTrips, let bandwidth, let minimumRTT else { return nil }
        let rtt = Double(minimumRTT.components.seconds) + Double(minimumRTT.components.attoseconds) / 1e18
        let bytes = bandwidth / 8 * rtt * roundTrips
        guard bytes.isFinite else { return nil }
        // A budget past Int64 (a huge `roundTrips`) is no limit, not a trap.
        return max(minimumBytes, bytes >= 0x1p63 ? .max : Int64(bytes.rounded(.up)))
    }

    /// The size of a delayable download's next range, given the current budget
    /// and the download's previous range (`nil` for its first): twice the
    /// budget, and at least ``rangeBytes``. While the budget is unknown (-1),
    /// ``rangeBytes`` for the first range and twice the previous one after it,
    /// as TCP's slow start grows its window: a fast link is not held to small
    /// ranges, and a slow one is not sent a whole body before it is measured.
    /// `nil` when downloads come whole.
    func rangeSize(budget: Int64, previous: Int? = nil) -> Int? {
        guard let rangeBytes, isOn else { return nil }
        guard budget >= 0 else {
            guard let previous else { return rangeBytes }
            let (doubled, overflow) = previous.multipliedReportingOverflow(by: 2)
            return overflow ? .max : max(rangeBytes, doubled)
        }
        let (doubled, overflow) = budget.multipliedReportingOverflow(by: 2)
        return Int(clamping: max(Int64(rangeBytes), overflow ? .max : doubled))
    }
}
