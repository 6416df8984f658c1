import Foundation
import Synchronization

/// What the controller measures about the network and what is fed by every
/// attempt: the monitor, the concurrency policy, the retry budget and the
/// retry jitter. Under a lock of its own (``NetworkController/measurements``),
/// so that feeding an attempt's sample does not take the controller's lock.
///
/// **Lock order:** the controller's lock may take this one inside it; never
/// the other way round.
struct Measurements: Sendable {
    var monitor: ConnectionMonitor
    var policy: ConcurrencyPolicy
    var budget: RetryBudget
    var random: JitterSource
    /// Quality changes the monitor made that the controller has not applied
    /// yet, in the monitor's order, each with its time
    /// (``NetworkController/applyMeasurements(in:at:)``).
    var pendingChanges: [(change: ConnectionMonitor.Action, at: Duration)] = []
    /// The policy's limit when the controller last applied the measurements.
    var appliedPolicyLimit: Int

    init(configuration: NetworkController.Configuration) {
        monitor = ConnectionMonitor(configuration: configuration.conditions.monitor)
        policy = configuration.limits.concurrency.starting(at: configuration.conditions.monitor.initialQuality)
        budget = configuration.retries.budget
        random = JitterSource(seed: configuration.environment.seed)
        appliedPolicyLimit = policy.limit
    }

    /// Whether the controller has something to apply.
    var hasChanges: Bool { !pendingChanges.isEmpty || policy.limit != appliedPolicyLimit }
}
