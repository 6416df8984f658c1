import DequeModule

/// Jobs that hold no slot: long-lived streams (``NetworkOperation/isLongLived``).
/// They wait in a queue of their own and start as soon as any work may run
/// (the limit is above zero: not offline, or probing) and their category is
/// not paused, whatever else runs; they neither pace delayable work nor are
/// paced, and a trickle or an idle check does not count them.
extension Scheduler {
    /// How many running jobs hold no slot.
    var runningUnslottedCount: Int {
        unslotted.isEmpty ? 0 : unslotted.lazy.filter { running.contains($0) }.count
    }

    /// Running jobs that hold a slot.
    var runningSlottedJobCount: Int { running.count - runningUnslottedCount }

    /// Puts a job that holds no slot in line to start.
    mutating func enqueueUnslotted(_ id: ID) {
        unslotted.insert(id)
        unslottedQueue.append(id)
    }

    /// Starts every waiting unslotted job that may run now.
    mutating func startUnslotted() {
        guard limit > 0, !unslottedQueue.isEmpty else { return }
        var waiting: Deque<ID> = []
        while let id = unslottedQueue.popFirst() {
            guard let job = jobs[id], !running.contains(id) else { continue }
            if paused.contains(job.category) {
                waiting.append(id)
                continue
            }
            markRunning(id, priority: job.priority)
            out.append(.start(job: id))
        }
        unslottedQueue = waiting
    }

    /// Forgets a job that ended, if it held no slot.
    mutating func forgetUnslotted(_ id: ID) {
        unslotted.remove(id)
    }
}
