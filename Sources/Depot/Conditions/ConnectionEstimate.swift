/// The controller's estimates of the link, for a status line.
public struct ConnectionEstimate: Sendable, Hashable {
    /// The quality class.
    public var quality: ConnectionQuality
    /// The smoothed bandwidth in bits per second, once measured.
    public var bandwidth: Double?
    /// The smoothed round-trip time (time to first byte), once measured.
    public var rtt: Duration?
    /// The concurrency limit in force.
    public var concurrencyLimit: Int
    /// The categories paused, by the app or by quality rules.
    public var pausedCategories: Set<OperationCategory>
}
