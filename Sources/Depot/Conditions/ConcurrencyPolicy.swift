/// Decides how many transfers may run at once, from what the ``ConnectionMonitor`` knows.
///
/// The controller keeps the policy of its configuration and asks it for a new
/// limit after every change the monitor sees. The simple policies depend on
/// the quality alone; ``adaptive(_:)`` probes for the limit the way TCP probes
/// for its window. ``NetworkController/concurrencyLimit`` is the limit in force.
///
/// For example:
///
/// ```swift
/// let controller = NetworkController(configuration: .init(baseURL: api, limits: .init(concurrency: .adaptive())))
/// ```
public struct ConcurrencyPolicy: Sendable {
    enum Base: Sendable {
        case map(@Sendable (ConnectionQuality) -> Int)
        case adaptive(Adaptive)
    }

    var base: Base
    var current: Int
    var lastQuality: ConnectionQuality?
    var lastStep: Duration?
    /// The adaptive limit before going offline.
    var beforeOffline: Int?

    init(base: Base) {
        self.base = base
        switch base {
        case .map(let limit): current = limit(.good)
        case .adaptive(let settings): current = settings.initial
        }
    }

    /// The limit in force now (before the first update: the limit for `.good`,
    /// or for the quality given to ``starting(at:)``, or the adaptive initial value).
    package var limit: Int { current }

    /// The policy as it stands before anything is measured at `quality` (a
    /// monitor's initial quality): a mapping starts at that quality's limit, so
    /// that a controller that starts at `.moderate` runs three transfers, not
    /// four. An adaptive policy starts at its initial value whatever the quality.
    package func starting(at quality: ConnectionQuality) -> ConcurrencyPolicy {
        var policy = self
        if case .map(let limit) = base { policy.current = limit(quality) }
        return policy
    }

    /// Offline 0, poor 1, moderate 3, good 4, excellent 6.
    ///
    /// Moderate links (150–550 kbit/s) are mostly slow mobile ones with round
    /// trips of several hundred milliseconds, where small requests wait on the
    /// round trip rather than on bandwidth: with 2, such a link idled while a
    /// queue of 2 KB documents went two at a time.
    public static let `default` = mapping([.offline: 0, .poor: 1, .moderate: 3, .good: 4, .excellent: 6])

    /// The same limit whatever the quality, except 0 when offline.
    ///
    /// - Parameter limit: How many transfers may run at once.
    public static func fixed(_ limit: Int) -> ConcurrencyPolicy {
        ConcurrencyPolicy(base: .map { $0 == .offline ? 0 : max(0, limit) })
    }

    /// A limit per quality. A quality missing from `limits` takes the limit of the
    /// nearest quality below it that is present (1 if none is, 0 for `.offline`).
    ///
    /// For example:
    ///
    /// ```swift
    /// let policy = ConcurrencyPolicy.mapping([.offline: 0, .poor: 1, .good: 3])   // moderate → 1, excellent → 3
    /// ```
    ///
    /// - Parameter limits: The limit for each quality.
    public static func mapping(_ limits: [ConnectionQuality: Int]) -> ConcurrencyPolicy {
        ConcurrencyPolicy(base: .map { quality in
            if let limit = limits[quality] { return max(0, limit) }
            if quality == .offline { return 0 }
            let below = ConnectionQuality.allCases.filter { $0 < quality && $0 != .offline }.reversed()
            for lower in below { if let limit = limits[lower] { return max(0, limit) } }
            return 1
        })
    }

    /// A limit computed by `limit` from the quality.
    ///
    /// - Parameter limit: Returns how many transfers may run at a quality. It
    ///   runs under the controller's measurements lock: it must not call the
    ///   controller.
    public static func custom(_ limit: @escaping @Sendable (ConnectionQuality) -> Int) -> ConcurrencyPolicy {
        ConcurrencyPolicy(base: .map { max(0, limit($0)) })
    }

    /// A limit that probes, AIMD-style: one more transfer per round trip while the
    /// round trip stays near its minimum, half as many when it inflates (queues are
    /// filling) or the quality drops; 0 while offline.
    ///
    /// - Parameter settings: The bounds and the tolerances.
    public static func adaptive(_ settings: Adaptive = .default) -> ConcurrencyPolicy {
        ConcurrencyPolicy(base: .adaptive(settings))
    }

    /// How an adaptive policy moves its limit.
    public struct Adaptive: Sendable, Hashable {
        /// The limit before anything is measured.
        public private(set) var initial: Int
        /// The lowest limit while online.
        public private(set) var minimum: Int
        /// The highest limit.
        public private(set) var maximum: Int
        /// Grow while the smoothed round trip is at most this multiple of the minimum.
        public private(set) var increaseBelow: Double
        /// Shrink when the smoothed round trip is above this multiple of the minimum.
        public private(set) var decreaseAbove: Double
        /// What the limit is multiplied by when it shrinks.
        public private(set) var decreaseFactor: Double
        /// The shortest time between two steps, when the round trip is shorter still.
        public var minimumStepInterval: Duration

        /// Makes adaptive settings.
        ///
        /// - Parameters:
        ///   - initial: The starting limit (2).
        ///   - minimum: The lowest online limit (1).
        ///   - maximum: The highest limit (8).
        ///   - increaseBelow: Grow while RTT ≤ this × minimum RTT (1.25).
        ///   - decreaseAbove: Shrink when RTT > this × minimum RTT (2).
        ///   - decreaseFactor: The multiplicative decrease (0.5).
        ///   - minimumStepInterval: The shortest time between steps (100 ms).
        public init(initial: Int = 2, minimum: Int = 1, maximum: Int = 8, increaseBelow: Double = 1.25, decreaseAbove: Double = 2, decreaseFactor: Double = 0.5, minimumStepInterval: Duration = .milliseconds(100)) {
            precondition(1 <= minimum && minimum <= maximum, "need 1 ≤ minimum ≤ maximum")
            precondition(increaseBelow <= decreaseAbove && 0 < decreaseFactor && decreaseFactor < 1, "bad tolerances")
            self.initial = min(max(initial, minimum), maximum)
            self.minimum = minimum
            self.maximum = maximum
            self.increaseBelow = increaseBelow
            self.decreaseAbove = decreaseAbove
            self.decreaseFactor = decreaseFactor
            self.minimumStepInterval = minimumStepInterval
        }

        /// From 2, between 1 and 8; grow below 1.25× the minimum RTT, halve above 2×.
        public static let `default` = Adaptive()
    }

    /// The limit for a quality, ignoring any adaptive state: for the mapped
    /// policies the mapped value; for the adaptive one 0 offline, else the current limit.
    ///
    /// - Parameter quality: A quality.
    public func limit(for quality: ConnectionQuality) -> Int {
        switch base {
        case .map(let limit): return limit(quality)
        case .adaptive: return quality == .offline ? 0 : current
        }
    }

    /// Takes in the monitor's latest estimates and returns the new limit if it changed.
    ///
    /// Call it after every event the monitor handles.
    ///
    /// - Parameters:
    ///   - quality: The current quality.
    ///   - rtt: The smoothed round-trip time, if known.
    ///   - minimumRTT: The minimum round-trip time, if known.
    ///   - time: Now, as elapsed time since the controller's origin.
    package mutating func update(quality: ConnectionQuality, rtt: Duration?, minimumRTT: Duration?, at time: Duration) -> Int? {
        let previousQuality = lastQuality
        lastQuality = quality
        let old = current
        switch base {
        case .map(let limit):
            current = limit(quality)
        case .adaptive(let settings):
            adapt(settings, quality: quality, previous: previousQuality, rtt: rtt, minimumRTT: minimumRTT, at: time)
        }
        return current == old ? nil : current
    }

    /// Takes in a monitor's state; the same as ``update(quality:rtt:minimumRTT:at:)``.
    ///
    /// - Parameters:
    ///   - monitor: The monitor, after it handled an event.
    ///   - time: Now, as elapsed time since the controller's origin.
    package mutating func update(from monitor: ConnectionMonitor, at time: Duration) -> Int? {
        update(quality: monitor.quality, rtt: monitor.rtt, minimumRTT: monitor.minimumRTT, at: time)
    }

    private mutating func adapt(_ settings: Adaptive, quality: ConnectionQuality, previous: ConnectionQuality?, rtt: Duration?, minimumRTT: Duration?, at time: Duration) {
        if quality == .offline {
            if current > 0 { beforeOffline = current }
            current = 0
            return
        }
        if current == 0 {
            // Back online: start where we were.
            current = beforeOffline ?? settings.initial
            beforeOffline = nil
            lastStep = time
            return
        }
        if let previous, previous != .offline, quality < previous {
            step(to: Int((Double(current) * settings.decreaseFactor).rounded(.down)), settings, at: time)
            return
        }
        guard let rtt, let minimumRTT, minimumRTT > .zero else { return }
        // One step per round trip at most, like TCP.
        let interval = max(rtt, settings.minimumStepInterval)
        if let lastStep, time - lastStep < interval { return }
        let ratio = rtt / minimumRTT
        if ratio > settings.decreaseAbove {
            step(to: Int((Double(current) * settings.decreaseFactor).rounded(.down)), settings, at: time)
        } else if ratio <= settings.increaseBelow {
            step(to: current + 1, settings, at: time)
        }
    }

    private mutating func step(to limit: Int, _ settings: Adaptive, at time: Duration) {
        current = min(max(limit, settings.minimum), settings.maximum)
        lastStep = time
    }
}
