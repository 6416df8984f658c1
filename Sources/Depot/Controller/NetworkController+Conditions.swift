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
    var random: SplitMix64
    /// Quality changes the monitor made that the controller has not applied
    /// yet, in the monitor's order, each with its time
    /// (``NetworkController/applyMeasurements(in:at:)``).
    var pendingChanges: [(change: ConnectionMonitor.Action, at: Duration)] = []
    /// The policy's limit when the controller last applied the measurements.
    var appliedPolicyLimit: Int

    init(configuration: NetworkController.Configuration) {
        monitor = ConnectionMonitor(configuration: configuration.monitor)
        policy = configuration.concurrencyPolicy
        budget = configuration.retryBudget
        random = SplitMix64(seed: configuration.jitterSeed)
        appliedPolicyLimit = policy.limit
    }

    /// Whether the controller has something to apply.
    var hasChanges: Bool { !pendingChanges.isEmpty || policy.limit != appliedPolicyLimit }
}

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

/// SplitMix64, for retry jitter that repeats when a seed is given.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    private let system: Bool

    init(seed: UInt64?) {
        state = seed ?? 0
        system = seed == nil
    }

    mutating func next() -> UInt64 {
        if system {
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        }
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension NetworkController {
    // MARK: - Public view of the network

    /// The connection quality as measured so far: the one the controller acts
    /// on, which the `qualityChanged` events follow.
    public var quality: ConnectionQuality {
        state.withLock { $0.conditions.quality }
    }

    /// The current estimates behind ``quality``.
    public var connectionEstimate: ConnectionEstimate {
        state.withLock { state in
            let monitor = measurements.withLock { $0.monitor }
            // The applied quality, so that it agrees with the limit and the paused categories.
            return ConnectionEstimate(quality: state.conditions.quality, bandwidth: monitor.bandwidth, rtt: monitor.rtt, concurrencyLimit: state.scheduler.limit, pausedCategories: state.scheduler.paused)
        }
    }

    // MARK: - Feeding the monitor

    /// One attempt's transfer ended: feed the monitor and apply what follows.
    ///
    /// - Parameters:
    ///   - sample: The attempt's sample (its bytes, or the link's bytes during
    ///     the transfer for a measurable one), when a response arrived.
    ///   - error: The attempt's transport error, when no response arrived.
    ///   - accepted: The response passed validation: the retry budget counts a success.
    func noteAttempt(sample: TransferSample?, error: DepotError?, accepted: Bool = false) {
        let event: ConnectionMonitor.Event?
        if let sample {
            event = .transfer(sample)
        } else if let error {
            event = ConnectionMonitor.Event.failure(error)
        } else {
            event = .responded
        }
        guard let event else { return }
        let now = timebase.now()
        let changed = measurements.withLock { measurements -> Bool in
            if accepted { measurements.budget.recordSuccess(at: now) }
            measurements.pendingChanges += measurements.monitor.handle(event, at: now).map { ($0, now) }
            // The policy sees every event (an adaptive one reacts to RTT, not only to quality).
            _ = measurements.policy.update(from: measurements.monitor, at: now)
            return measurements.hasChanges
        }
        // Usually nothing changed, and the controller's lock is not needed. Two
        // attempts that both changed something both apply; the second finds the
        // first's changes taken already. (Only here: other holders of the
        // controller's lock act on the quality last applied.)
        guard changed else { return }
        let effects = state.withLock { state in applyMeasurements(in: &state, at: now) }
        perform(effects)
    }

    /// Applies what the measurements changed since the last time, in order: each
    /// quality change (its event, the rules, the probe loop when the network is
    /// gone) at the time the monitor made it, then the limit.
    func applyMeasurements(in state: inout State, at now: Duration) -> [Effect] {
        let (pending, policyLimit) = measurements.withLock { measurements in
            defer {
                measurements.pendingChanges.removeAll()
                measurements.appliedPolicyLimit = measurements.policy.limit
            }
            return (measurements.pendingChanges, measurements.policy.limit)
        }
        var effects: [Effect] = []
        var latest = now
        for (change, now) in pending {
            guard case .qualityChanged(let old, let new) = change else { continue }
            latest = max(latest, now)
            state.conditions.quality = new
            effects.append(.emit(controllerEvent(.qualityChanged(from: old, to: new), at: now), nil))
            configuration.trace?.quality(new, at: now)
            if new == .offline {
                state.conditions.probing = false
                state.conditions.probeAttempt = 0
                if state.probeTask == nil, !state.isShutDown { effects.append(.startProbing) }
            } else if old == .offline {
                state.conditions.probing = false
                state.conditions.probeAttempt = 0
                if let probe = state.probeTask {
                    state.probeTask = nil
                    effects.append(.cancel(probe))
                }
            }
            // Rules: pause and drop on a bad network, resume when it recovers.
            let queued = state.scheduler.queuedJobs.flatMap { job in
                state.scheduler.waiters(of: job.id).map { QualityRules.Queued(id: $0, priority: job.priority, category: job.category) }
            }
            let droppable = state.conditions.droppable
            let changes = state.conditions.rules.changes(from: old, to: new, queued: queued) { droppable.contains($0) }
            for category in changes.pause.sorted(by: { $0.rawValue < $1.rawValue }) where !state.conditions.rulePaused.contains(category) {
                state.conditions.rulePaused.insert(category)
                apply(state.scheduler.pause(category: category), in: &state, at: now, into: &effects)
                effects.append(.emit(controllerEvent(.categoryPaused(category), at: now), nil))
            }
            for category in changes.resume.sorted(by: { $0.rawValue < $1.rawValue }) where state.conditions.rulePaused.contains(category) {
                state.conditions.rulePaused.remove(category)
                if !state.conditions.userPaused.contains(category) {
                    apply(state.scheduler.resume(category: category), in: &state, at: now, into: &effects)
                }
                effects.append(.emit(controllerEvent(.categoryResumed(category), at: now), nil))
            }
            for ticket in changes.cancel {
                state.conditions.droppable.remove(ticket)
                apply(state.scheduler.cancel(ticket), in: &state, at: now, into: &effects)
            }
        }
        state.conditions.policyLimit = policyLimit
        effects += applyEffectiveLimit(in: &state, at: latest)
        return effects
    }

    /// Sets the scheduler's limit to what quality, policy and probing allow.
    func applyEffectiveLimit(in state: inout State, at now: Duration) -> [Effect] {
        let limit = state.conditions.effectiveLimit
        guard limit != state.scheduler.limit else { return [] }
        var effects = [Effect.emit(controllerEvent(.concurrencyChanged(limit: limit), at: now), nil)]
        apply(state.scheduler.setLimit(limit), in: &state, at: now, into: &effects)
        return effects
    }

    func controllerEvent(_ detail: NetworkEvent.Detail, at now: Duration) -> NetworkEvent {
        NetworkEvent(time: now, ticket: nil, operation: nil, detail: detail)
    }

    // MARK: - Offline probes

    /// While offline, lets one queued job try the network after a backoff
    /// (doubling from `probeBackoff.lowerBound` to its upper bound), until an
    /// answer brings the quality back.
    func startProbing() {
        let backoff = configuration.probeBackoff
        let timebase = self.timebase
        let task = Task { [weak self] in
            var delay = backoff.lowerBound
            while !Task.isCancelled {
                do { try await timebase.sleep(for: delay) } catch { return }
                guard let self else { return }
                let now = timebase.now()
                let effects = self.state.withLock { state -> [Effect]? in
                    guard state.conditions.isOffline, !state.isShutDown else { return nil }
                    state.conditions.probing = true
                    state.conditions.probeAttempt += 1
                    var effects = [Effect.emit(self.controllerEvent(.probing(attempt: state.conditions.probeAttempt), at: now), nil)]
                    effects += self.applyEffectiveLimit(in: &state, at: now)
                    return effects
                }
                guard let effects else { return }
                self.perform(effects)
                delay = min(delay * 2, backoff.upperBound)
            }
        }
        let stale = state.withLock { state -> Task<Void, Never>? in
            guard state.conditions.isOffline, state.probeTask == nil, !state.isShutDown else { return task }
            state.probeTask = task
            return nil
        }
        stale?.cancel()
    }

    /// The tickets waiting for `job`.
    func waiters(of job: Ticket.ID) -> [Ticket.ID] {
        state.withLock { $0.scheduler.waiters(of: job) }
    }

    // MARK: - Retries

    /// Whether to retry an attempt that failed, with the budget and jitter applied.
    func retryDecision<Operation: NetworkOperation>(
        for error: DepotError,
        headers: HeaderFields,
        operation: Operation,
        method: NetworkRequest.Method,
        attempt: Int
    ) -> RetryDecision {
        let policy = operation.retryPolicy ?? configuration.retryPolicy
        let date = configuration.currentDate()
        let now = timebase.now()
        return state.withLock { state in
            guard !state.isShutDown else { return .doNotRetry(.notRetryable) }
            return measurements.withLock { measurements in
                let decision = policy.decision(for: error, headers: headers, method: method, attempt: attempt, now: date, using: &measurements.random)
                return measurements.budget.gate(decision, at: now)
            }
        }
    }

    /// Tells the waiters of `job` that it will be retried.
    func beginBackoff(job: Ticket.ID, attempt: Int, delay: Duration, error: DepotError) {
        let now = timebase.now()
        let effects = state.withLock { state -> [Effect] in
            state.scheduler.waiters(of: job).compactMap { waiter in
                guard let ticket = state.records[waiter]?.ticket else { return nil }
                return emit(ticket, .retried(attempt: attempt, delay: delay, error: error), at: now)
            }
        }
        perform(effects)
    }

    /// Counts a job as backing off: call it right before the job sleeps.
    func markBackingOff() {
        state.withLock { $0.conditions.backingOff += 1 }
    }

    func endBackoff(job: Ticket.ID, nextAttempt: Int) {
        let now = timebase.now()
        let effects = state.withLock { state -> [Effect] in
            state.conditions.backingOff -= 1
            return state.scheduler.waiters(of: job).compactMap { waiter in
                guard let ticket = state.records[waiter]?.ticket else { return nil }
                configuration.trace?.started(waiter, at: now)
                return emit(ticket, .started(attempt: nextAttempt), at: now)
            }
        }
        perform(effects)
    }
}

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
