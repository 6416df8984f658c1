import DequeModule

/// The scheduler's credential holds: a job that needs credentials that are
/// not there waits out of the queues, holding no slot, until `releaseHeld()`.
/// `requeue(job:holding:)` makes them, or puts a job back in its queue.
extension Scheduler {
    /// Puts a running job back at the tail of its priority's queue, its tickets
    /// still waiting: the transfer found no network and will run again when the
    /// limit allows. A job nobody waits for any more ends as cancelled instead.
    ///
    /// The tail, so that offline probes take turns: at the head, a job whose
    /// host alone refuses connections would be every probe's pick, and work for
    /// reachable hosts behind it would never run.
    ///
    /// With `holding`, the job waits out of the queues until ``releaseHeld()``
    /// (it needs credentials that are not there), holding no slot.
    mutating func requeue(job id: ID, holding: Bool = false) -> [Action] {
        if let job = jobs[id], running.contains(id) {
            guard !job.waiters.isEmpty else { return finish(job: id, outcome: .cancelled) }
            markStopped(id, priority: job.priority)
            if holding {
                held.append(id)
            } else if unslotted.contains(id) {
                unslottedQueue.append(id)
            } else {
                queues[job.priority.rawValue].append(id)
            }
        }
        begin()
        pump()
        return out
    }

    /// Puts every held job back in its queue, oldest first.
    mutating func releaseHeld() -> [Action] {
        let released = held
        held.removeAll()
        for id in released {
            guard let job = jobs[id], !running.contains(id) else { continue }
            if unslotted.contains(id) {
                unslottedQueue.append(id)
            } else {
                queues[job.priority.rawValue].append(id)
            }
        }
        begin()
        pump()
        return out
    }

    /// How many jobs wait for ``releaseHeld()``.
    var heldJobCount: Int { held.reduce(0) { $0 + (jobs[$1] != nil ? 1 : 0) } }
}
