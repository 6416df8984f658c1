import Foundation

/// Retry decisions and the backoff between attempts.
extension NetworkController {
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


/// Retry jitter: the system's random numbers, or ``SplitMix64`` when a seed
/// is given, so that a test's backoff repeats.
struct JitterSource: RandomNumberGenerator, Sendable {
    private var seeded: SplitMix64?

    init(seed: UInt64?) {
        seeded = seed.map(SplitMix64.init(seed:))
    }

    mutating func next() -> UInt64 {
        guard seeded != nil else {
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        }
        return seeded!.next()
    }
}
