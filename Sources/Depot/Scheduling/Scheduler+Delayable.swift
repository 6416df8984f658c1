/// The scheduler's delayable admission: how many delayable (`.low` and below)
/// jobs may start beside important work; under pacing, one after another
/// (heavy until drained) and not while urgent work runs; jobs that rest
/// during a backoff; whether a delayable download may ask for its next range.
extension Scheduler {
    /// Turns delayable pacing on or off; off, delayable jobs start whenever
    /// ``delayableRoom`` allows, as before pacing existed.
    mutating func setPacing(_ on: Bool) -> [Action] {
        paceDelayable = on
        begin()
        pump()
        return out
    }

    /// A running delayable job has at most the pacing budget's bytes still to
    /// come: delayable jobs may start again. A no-op for any other job (an
    /// urgent job holds delayable work back until it stops).
    mutating func drained(job id: ID) -> [Action] {
        guard let job = jobs[id], job.priority < Self.urgent, heavy.remove(id) != nil else { return [] }
        begin()
        pump()
        return out
    }

    /// Whether a running job still holds back other delayable work under pacing.
    func isHeavy(_ job: ID) -> Bool { heavy.contains(job) }

    /// A running job sleeps before its next attempt (a retry's backoff, perhaps
    /// a long `Retry-After`): it sends and receives nothing meanwhile, so it
    /// holds no delayable work back and pauses no byte ranges.
    mutating func rest(job id: ID) -> [Action] {
        guard running.contains(id), resting.insert(id).inserted, heavy.remove(id) != nil else { return [] }
        begin()
        pump()
        return out
    }

    /// The job's next attempt begins: under pacing it holds delayable work back
    /// again, as a job that starts does. Delayable work that started while it
    /// slept goes on (its ranges wait, if it is ranged).
    mutating func wake(job id: ID) {
        guard resting.remove(id) != nil, running.contains(id), let job = jobs[id], !unslotted.contains(id) else { return }
        if job.priority <= Self.delayable || job.priority >= Self.urgent { heavy.insert(id) }
    }

    /// Whether a running delayable job may ask for its download's next byte
    /// range: no other urgent job runs (see ``DelayablePacing``). A job that is
    /// no longer delayable, or no longer known, never waits.
    func mayContinueRanges(of id: ID) -> Bool {
        guard let job = jobs[id], job.priority <= Self.delayable else { return true }
        // A stream (no slot) is urgent for hours: it holds no range back.
        return !running.contains { $0 != id && !resting.contains($0) && !unslotted.contains($0) && (jobs[$0]?.priority ?? .low) >= Self.urgent }
    }

    /// Work at this priority or below is "delayable", as browsers call images
    /// and prefetches: it yields the link to more important work.
    static let delayable = Priority.low

    /// Work at this priority or above is "urgent": under pacing, no delayable
    /// job starts while one runs, so that no delayable bytes queue ahead of its
    /// later ones. Its own bytes keep the link busy; the link idles for one
    /// round trip when it ends. (`.normal` work shares the link with one
    /// delayable job: small requests that wait on round trips would leave it idle.)
    static let urgent = Priority.high

    /// How many delayable jobs run now, and whether important work runs beside them.
    var runningMix: (delayable: Int, important: Bool) {
        (runningDelayableJobCount, runningSlottedJobCount > runningDelayableJobCount)
    }

    /// How many more delayable jobs may start now. With a limit of 3 or more,
    /// one slot stays free for important work (with 2, keeping one free would
    /// halve the images' concurrency and leave the link idle on every round trip); while important work runs, at
    /// most one delayable job does (Chrome's rule for requests while
    /// layout-blocking ones are in flight). A low-priority transfer that shares
    /// the link slows every other transfer, so this is what lets a high-priority
    /// request jump a queue of a hundred images on a slow link. Under pacing,
    /// none while a delayable or urgent job that is not yet drained runs.
    var delayableRoom: Int {
        if paceDelayable, !heavy.isEmpty { return 0 }
        let mix = runningMix
        let cap = mix.important ? 1 : (limit >= 3 ? limit - 1 : limit)
        return max(0, cap - mix.delayable)
    }
}
