/// How good the network is right now, from no connection at all to a fast one.
///
/// Qualities are ordered, so rules can say "at or below `.poor`":
///
/// ```swift
/// if controller.quality <= .poor { showLowBandwidthHint() }
/// ```
///
/// Frozen on purpose: the five classes of Facebook's network connection
/// class, in order; a `switch` over them stays exhaustive.
public enum ConnectionQuality: Int, Sendable, Hashable, Comparable, CaseIterable, Codable, CustomStringConvertible {
    /// No connection: requests fail before reaching a server.
    case offline = 0
    /// Below 150 kbps by default: small JSON only.
    case poor = 1
    /// 150–550 kbps by default.
    case moderate = 2
    /// 550 kbps–2 Mbps by default.
    case good = 3
    /// 2 Mbps and more by default.
    case excellent = 4

    public static func < (lhs: ConnectionQuality, rhs: ConnectionQuality) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .offline: return "offline"
        case .poor: return "poor"
        case .moderate: return "moderate"
        case .good: return "good"
        case .excellent: return "excellent"
        }
    }

    /// The bandwidths, in bits per second, where one quality ends and the next begins.
    ///
    /// A bandwidth below ``moderate`` is `.poor`; at or above ``excellent`` it is
    /// `.excellent`. For example, for an app whose lightest screen needs 300 kbit/s:
    ///
    /// ```swift
    /// var configuration = NetworkController.Configuration(baseURL: api)
    /// configuration.conditions.monitor.thresholds = .init(moderate: 300_000, good: 1_000_000, excellent: 5_000_000)
    /// ```
    public struct Thresholds: Sendable, Hashable {
        /// The lowest bandwidth, in bits per second, that counts as `.moderate`.
        /// Read-only: the three must increase, so they change together, through
        /// ``init(moderate:good:excellent:)``.
        public private(set) var moderate: Double
        /// The lowest bandwidth, in bits per second, that counts as `.good`.
        public private(set) var good: Double
        /// The lowest bandwidth, in bits per second, that counts as `.excellent`.
        public private(set) var excellent: Double

        /// Makes thresholds; each must be above the one before.
        ///
        /// - Parameters:
        ///   - moderate: The lowest bandwidth (bits/s) of `.moderate`.
        ///   - good: The lowest bandwidth (bits/s) of `.good`.
        ///   - excellent: The lowest bandwidth (bits/s) of `.excellent`.
        public init(moderate: Double, good: Double, excellent: Double) {
            precondition(0 < moderate && moderate < good && good < excellent, "thresholds must increase")
            self.moderate = moderate
            self.good = good
            self.excellent = excellent
        }

        /// Facebook's network connection class: poor below 150 kbps, moderate
        /// below 550 kbps, good below 2 Mbps, excellent above.
        public static let `default` = Thresholds(moderate: 150_000, good: 550_000, excellent: 2_000_000)

        /// The quality of a link with this bandwidth (never `.offline`).
        ///
        /// - Parameter bitsPerSecond: A measured bandwidth.
        package func quality(forBandwidth bitsPerSecond: Double) -> ConnectionQuality {
            if bitsPerSecond >= excellent { return .excellent }
            if bitsPerSecond >= good { return .good }
            if bitsPerSecond >= moderate { return .moderate }
            return .poor
        }
    }
}
