import Foundation

/// Time and chance, injected: the clock for timeouts, backoff and events, the
/// wall date for `Retry-After` dates and the ledger's `lastSynced`, and the
/// seed of retry jitter.
///
/// Give the controller and the ``Store`` the same environment, so that the
/// network and the cache agree on time; tests give both a `ManualClock` and a
/// fixed date.
///
/// ```swift
/// let environment = DepotEnvironment(clock: clock, date: { fixedDate }, seed: 42)
/// let store = try Store(path: path, migrator: migrator, environment: environment)
/// let controller = NetworkController(
///     configuration: .init(baseURL: serverURL, environment: environment),
///     store: store
/// )
/// ```
public struct DepotEnvironment: Sendable {
    /// The source of time for timeouts, grace periods, backoff and event
    /// timestamps. Default: `ContinuousClock`.
    public var clock: any Clock<Duration>
    /// The wall date now: `Retry-After` dates, the ledger's `lastSynced`,
    /// ``OperationContext/now``. Default: `Date()`.
    public var date: @Sendable () -> Date
    /// A fixed number from which retry jitter is drawn, so that backoff
    /// delays repeat from run to run; `nil` (the default) draws from the system.
    public var seed: UInt64?

    /// Makes an environment; every field has a default.
    public init(clock: any Clock<Duration> = ContinuousClock(), date: @escaping @Sendable () -> Date = { Date() }, seed: UInt64? = nil) {
        self.clock = clock
        self.date = date
        self.seed = seed
    }

    /// The system's continuous clock and date, and jitter drawn from the system.
    public static var live: DepotEnvironment { DepotEnvironment() }
}
