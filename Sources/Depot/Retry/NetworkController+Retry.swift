import Foundation
import Seeded

/// Retry decisions and the backoff between attempts.
extension NetworkController {
    // MARK: - Retries

    /// Whether the retry budget allows a retry after `delay` (and the controller still runs).
    func gateRetry(after delay: Duration) -> RetryDecision {
        let now = timebase.now()
        return state.withLock { state in
            guard !state.isShutDown else { return .doNotRetry(.notRetryable) }
            return measurements.withLock { $0.budget.gate(.retry(after: delay), at: now) }
        }
    }

    /// Tells the waiters of `job` that it will be retried.
    func beginBackoff(job: Ticket.ID, attempt: Int, delay: Duration, error: DepotError) {
        let error = configuration.observability.redaction.error(error)
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
    /// With `resting`, it holds no delayable work back while it sleeps
    /// (``Scheduler/rest(job:)``) until ``endRest(job:)``.
    func markBackingOff(job: Ticket.ID, resting: Bool) {
        let effects = state.withLock { state -> [Effect] in
            state.backingOff += 1
            guard resting else { return [] }
            let actions = state.scheduler.rest(job: job)
            var effects = actions.isEmpty ? [] : apply(actions, in: &state, at: timebase.now())
            effects += rangeWaiterResumptions(in: &state)
            return effects
        }
        perform(effects)
    }

    /// A resting job woke a margin before its retry: it holds delayable work
    /// back again, so that what that work has on its way drains before the
    /// retry goes out. It no longer counts as backing off until it sleeps again.
    func endRest(job: Ticket.ID) {
        state.withLock { state in
            state.backingOff -= 1
            state.scheduler.wake(job: job)
        }
    }

    /// When a job that sleeps `delay` before its retry may rest, and until
    /// when: a sleep long enough to be worth lending the link to delayable
    /// work, until ``restMargin`` before `wakeAt`. `nil` for a short sleep
    /// (a zero delay after a token refresh, a jittered backoff), in which
    /// delayable bytes would only get in the retry's way.
    func restEnd(sleeping delay: Duration, until wakeAt: Duration) -> Duration? {
        let rtt = measurements.withLock { $0.monitor.rtt } ?? .seconds(1)
        // A range is four round trips of link (twice the default pacing
        // budget), and its request one more: let it drain before the retry.
        let margin = max(.seconds(1), rtt * 5)
        return delay >= margin * 2 ? wakeAt - margin : nil
    }

    func endBackoff(job: Ticket.ID, nextAttempt: Int) {
        let now = timebase.now()
        let effects = state.withLock { state -> [Effect] in
            state.backingOff -= 1
            state.scheduler.wake(job: job)
            return state.scheduler.waiters(of: job).compactMap { waiter in
                guard let ticket = state.records[waiter]?.ticket else { return nil }
                configuration.observability.trace?.started(waiter, at: now)
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

extension Result where Success == NetworkResponse, Failure == DepotError {
    /// The failure, if it is one.
    var error: DepotError? {
        if case .failure(let error) = self { return error }
        return nil
    }

    /// The response's status, or the failure's.
    var status: Int? {
        switch self {
        case .success(let response): return response.status
        case .failure(let error): return error.status
        }
    }
}

/// The controller's side of every job's attempts.
extension NetworkController: AttemptHost {
    /// What interceptors and the authenticator get from this controller.
    func interceptorContext() -> InterceptorContext {
        InterceptorContext(
            now: configuration.environment.date(),
            logger: configuration.observability.logger,
            random: { [self] in measurements.withLock { $0.random.next() } },
            send: { [pipeline, configuration] request throws(DepotError) in
                do {
                    let timeout = Timeout.default.capped(at: configuration.limits.longestTransfer)
                    return try await pipeline.run(request, timeout: timeout) { _ in }.response
                } catch {
                    throw DepotError.wrap(error, operation: "token refresh", fallback: .transport)
                }
            }
        )
    }
}
