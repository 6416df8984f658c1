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
