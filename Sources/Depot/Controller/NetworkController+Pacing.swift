import Synchronization

/// Delayable pacing (``DelayablePacing``): a running delayable job tells the
/// scheduler once, from its progress, that at most the budget's bytes are
/// still to come, and the next delayable job may start.
extension NetworkController {
    /// Called with each chunk's progress of a paced delayable job.
    func notePacing(_ latch: PacingLatch, _ progress: TransferProgress) {
        guard !latch.isDone else { return }
        let budget = pacingBudget.load(ordering: .relaxed)
        if budget >= 0 {
            // A body of unknown length holds the next one back until it ends.
            guard let expected = progress.expected, expected - progress.received <= budget else { return }
        }
        guard latch.markDone() else { return }
        let effects = state.withLock { state -> [Effect] in
            let actions = state.scheduler.drained(job: latch.job)
            guard !actions.isEmpty else { return [] }
            return apply(actions, in: &state, at: timebase.now())
        }
        perform(effects)
    }
}

/// Byte ranges (``DelayablePacing/rangeBytes``): a delayable download asks
/// for its next range only while no urgent work runs.
extension NetworkController {
    /// The ranges of a delayable `GET` of `job`, or `nil` when it comes whole.
    func delayableRanges(for request: TransportRequest, priority: Priority, job: Ticket.ID, meter: LinkMeter) -> TransferPipeline.Ranges? {
        let pacing = configuration.conditions.delayablePacing
        guard priority <= Scheduler.delayable, request.method == .get, request.body == nil, !request.headers.contains("Range"),
              let first = pacing.rangeBytes, pacing.isOn
        else { return nil }
        return TransferPipeline.Ranges(
            size: { [weak self] previous in
                pacing.rangeSize(budget: self?.pacingBudget.load(ordering: .relaxed) ?? -1, previous: previous) ?? first
            },
            mayContinue: { [weak self] in await self?.waitToContinueRanges(of: job) },
            partEnded: meter.pause,
            partBegan: meter.resume
        )
    }

    /// Returns once `job` may ask for its next byte range
    /// (``Scheduler/mayContinueRanges(of:)``), or its task is cancelled.
    func waitToContinueRanges(of job: Ticket.ID) async {
        let id = state.withLock { state -> UInt64? in
            guard !state.scheduler.mayContinueRanges(of: job) else { return nil }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let id else { return }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Registered under the lock only if no urgent job ended and no
                // cancellation came in the meantime (a cancellation handler that
                // ran first found nothing to resume).
                let (goesOn, watchers) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled || state.scheduler.mayContinueRanges(of: job) { return (true, []) }
                    state.rangeWaiters[id] = (job, continuation)
                    defer { state.rangePauseWatchers.removeAll() }
                    return (false, Array(state.rangePauseWatchers.values))
                }
                if goesOn { continuation.resume() }
                for watcher in watchers { watcher.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.rangeWaiters.removeValue(forKey: id) }
            waiter?.continuation.resume()
        }
    }

    /// Returns once a download waits between two byte ranges (at once if
    /// one does), or the calling task is cancelled: the fact tests wait on
    /// instead of reading ``activity`` until it says so.
    package func waitUntilPausedBetweenRanges() async {
        let key = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if Task.isCancelled || !state.rangeWaiters.isEmpty { return true }
                    state.rangePauseWatchers[key] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let watcher = state.withLock { $0.rangePauseWatchers.removeValue(forKey: key) }
            watcher?.resume()
        }
    }

    /// Lets go every range waiter that may go on now: called when a job ends.
    func releaseRangeWaiters() {
        let effects = state.withLock { rangeWaiterResumptions(in: &$0) }
        if !effects.isEmpty { perform(effects) }
    }

    /// The range waiters that may go on now, taken out of `state`, as effects.
    func rangeWaiterResumptions(in state: inout State) -> [Effect] {
        guard !state.rangeWaiters.isEmpty else { return [] }
        var effects: [Effect] = []
        for (id, waiter) in state.rangeWaiters where state.scheduler.mayContinueRanges(of: waiter.job) {
            state.rangeWaiters[id] = nil
            effects.append(.resume(waiter.continuation))
        }
        return effects
    }
}

/// Whether a paced job has told the scheduler it is drained: once per attempt.
final class PacingLatch: Sendable {
    let job: Ticket.ID
    private let done = Atomic<Bool>(false)

    init(job: Ticket.ID) { self.job = job }

    var isDone: Bool { done.load(ordering: .relaxed) }

    /// Sets the latch; `true` for the caller that set it.
    func markDone() -> Bool {
        done.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
    }
}
