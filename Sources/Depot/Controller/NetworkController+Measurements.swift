import Foundation
import Synchronization

/// The controller's view of the network: feeding the monitor with every
/// attempt, and applying what it measures (quality, limit, rules).
extension NetworkController {
    // MARK: - Public view of the network

    /// The connection quality as measured so far: the one the controller acts
    /// on, which the `qualityChanged` events follow.
    public var quality: ConnectionQuality {
        state.withLock { $0.conditions.quality }
    }

    /// The current estimates behind ``quality``.
    public var connectionSnapshot: ConnectionSnapshot {
        state.withLock { state in
            let monitor = measurements.withLock { $0.monitor }
            // The applied quality, so that it agrees with the limit and the paused categories.
            return ConnectionSnapshot(quality: state.conditions.quality, bandwidth: monitor.bandwidth, rtt: monitor.rtt, concurrencyLimit: state.scheduler.limit, pausedCategories: state.scheduler.paused)
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
            if configuration.conditions.delayablePacing.isOn {
                let budget = configuration.conditions.delayablePacing.budget(bandwidth: measurements.monitor.bandwidth, minimumRTT: measurements.monitor.minimumRTT)
                pacingBudget.store(budget ?? -1, ordering: .relaxed)
            }
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
            let queued = state.scheduler.queuedJobs.flatMap { job in
                state.scheduler.waiters(of: job.id).map { QualityRules.Queued(id: $0, priority: job.priority, category: job.category) }
            }
            handle(.qualityChanged(from: old, to: new, queued: queued), in: &state, at: now, into: &effects)
        }
        handle(.policyLimitChanged(policyLimit), in: &state, at: latest, into: &effects)
        return effects
    }

    /// Tells the conditions what happened and carries out what they answer,
    /// in their order.
    func handle(_ event: ConditionsState.Event, in state: inout State, at now: Duration, into effects: inout [Effect]) {
        for effect in state.conditions.handle(event) {
            switch effect {
            case .announce(let announcement):
                effects.append(.emit(controllerEvent(announcement.detail, at: now), nil))
            case .traceQuality(let quality):
                configuration.observability.trace?.quality(quality, at: now)
            case .startProbing:
                if state.probeTask == nil, state.runsWork { effects.append(.startProbing) }
            case .stopProbing:
                if let probe = state.probeTask.take() { effects.append(.cancel(probe)) }
            case .pause(let category):
                apply(state.scheduler.pause(category: category), in: &state, at: now, into: &effects)
            case .resume(let category):
                apply(state.scheduler.resume(category: category), in: &state, at: now, into: &effects)
            case .drop(let ticket):
                apply(state.scheduler.cancel(ticket), in: &state, at: now, into: &effects)
            case .setLimit(let limit):
                apply(state.scheduler.setLimit(limit), in: &state, at: now, into: &effects)
            }
        }
    }

    func controllerEvent(_ detail: NetworkEvent.Detail, at now: Duration) -> NetworkEvent {
        NetworkEvent(time: now, ticket: nil, operation: nil, detail: detail)
    }
}
