import Foundation

/// Offline probes: while offline, one queued operation at a time may try the network.
extension NetworkController {
    // MARK: - Offline probes

    /// While offline, lets one queued job try the network after a backoff
    /// (doubling from `probeBackoff.lowerBound` to its upper bound), until an
    /// answer brings the quality back, or the grace of a shutdown ends.
    func startProbing() {
        let backoff = configuration.conditions.probeBackoff
        let timebase = self.timebase
        let task = Task { [weak self] in
            var delay = backoff.lowerBound
            while !Task.isCancelled {
                do { try await timebase.sleep(for: delay) } catch { return }
                guard let self else { return }
                let now = timebase.now()
                let effects = self.state.withLock { state -> [Effect]? in
                    guard state.conditions.isOffline, state.runsWork else { return nil }
                    var effects: [Effect] = []
                    self.handle(.probeDue, in: &state, at: now, into: &effects)
                    return effects
                }
                guard let effects else { return }
                self.perform(effects)
                delay = min(delay * 2, backoff.upperBound)
            }
        }
        let stale = state.withLock { state -> Task<Void, Never>? in
            guard state.conditions.isOffline, state.probeTask == nil, state.runsWork else { return task }
            state.probeTask = task
            return nil
        }
        stale?.cancel()
    }

    /// The tickets waiting for `job`.
    func waiters(of job: Ticket.ID) -> [Ticket.ID] {
        state.withLock { $0.scheduler.waiters(of: job) }
    }
}
