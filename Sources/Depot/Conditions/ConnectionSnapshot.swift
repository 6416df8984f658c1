/// The controller's estimates of the link at one instant, for a status line.
///
/// Depot names its pairs one way: a `…Snapshot` is a `Sendable` value at one
/// instant, and a `…Status` is the `@Observable` that keeps one current on the
/// main actor (``ConnectionStatus`` here; DepotStore's `OutboxSnapshot` and
/// `OutboxStatus`).
public struct ConnectionSnapshot: Sendable, Hashable {
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
