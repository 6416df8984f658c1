import Foundation

/// The controller's view of the network as it acts on it: the quality and the
/// policy's limit it last applied, the rules, and the probe state while
/// offline. Kept in the controller's state, under its lock; every change
/// returns effects like the scheduler's actions do.
struct ConditionsState: Sendable {
    /// The quality the controller acts on: the monitor's, once applied.
    var quality: ConnectionQuality
    /// The concurrency policy's limit, once applied.
    var policyLimit: Int
    var rules: QualityRules
    /// Categories paused by the app, and by quality rules: kept apart so that a
    /// recovering network does not resume what the app paused.
    var userPaused: Set<OperationCategory> = []
    var rulePaused: Set<OperationCategory> = []
    /// Queued tickets whose operation may be dropped on a bad network.
    var droppable: Set<Ticket.ID> = []
    /// Offline: one queued job may try the network.
    var probing = false
    var probeAttempt = 0
    /// Jobs sleeping between attempts (a retry's backoff).
    var backingOff = 0

    init(configuration: NetworkController.Configuration, measurements: Measurements) {
        quality = measurements.monitor.quality
        policyLimit = measurements.policy.limit
        rules = configuration.qualityRules
    }

    var isOffline: Bool { quality == .offline }

    /// The limit the scheduler should have now.
    var effectiveLimit: Int {
        if isOffline { return probing ? 1 : 0 }
        return policyLimit
    }
}
