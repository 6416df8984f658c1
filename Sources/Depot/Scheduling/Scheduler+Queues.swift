import DequeModule

/// The scheduler's queues and coalescing: one FIFO per priority, and which
/// queued job starts next (paused categories wait, and trickle when nothing
/// else can run); a ticket whose key matches a job joins it and may promote it.
extension Scheduler {
    /// Queued jobs in `category` stop starting. Running ones go on.
    mutating func pause(category: OperationCategory) -> [Action] {
        paused.insert(category)
        return []
    }

    /// Jobs in `category` may start again.
    mutating func resume(category: OperationCategory) -> [Action] {
        paused.remove(category)
        // A job that trickled out of this category now runs as any other: it holds its slot.
        trickling = trickling.filter { jobs[$0]?.category != category }
        begin()
        pump()
        return out
    }

    /// Starts the oldest, most urgent queued job of `categories` even though they
    /// are paused, when nothing runs and nothing else can start: on a network too
    /// poor for images, images still trickle one at a time when they are all
    /// that is left, and each one measures the network again.
    mutating func trickle(from categories: Set<OperationCategory>) -> [Action] {
        guard runningSlottedJobCount == 0, limit > 0, !categories.isEmpty else { return [] }
        for priority in Priority.allCases.reversed() {
            let index = priority.rawValue
            guard let position = queues[index].firstIndex(where: { id in
                guard let job = jobs[id], isLive(id, at: priority) else { return false }
                return categories.contains(job.category)
            }) else { continue }
            let id = queues[index].remove(at: position)
            markRunning(id, priority: priority)
            trickling.insert(id)
            begin()
            out.append(.start(job: id))
            return out
        }
        return []
    }

    /// A ready ticket joins a matching job or makes a new queued one.
    mutating func admit(_ entry: Entry) {
        if let key = entry.coalescingKey, let jobID = byKey[key], var job = jobs[jobID] {
            job.add(entry)
            tickets[entry.id] = .waiting(job: jobID)
            out.append(.coalesced(entry.id, into: jobID))
            if entry.priority > job.priority {
                out.append(.promoted(job: jobID, from: job.priority, to: entry.priority))
                let isRunning = running.contains(jobID)
                if isRunning, job.priority <= Self.delayable, entry.priority > Self.delayable {
                    runningDelayableJobCount -= 1
                    // Urgent now, it goes on holding delayable work back until drained.
                    if entry.priority < Self.urgent { heavy.remove(jobID) }
                }
                job.priority = entry.priority
                if !isRunning, !held.contains(jobID), !unslotted.contains(jobID) { queues[entry.priority.rawValue].append(jobID) }
            }
            jobs[jobID] = job
            return
        }
        jobs[entry.id] = Job(priority: entry.priority, category: entry.category, key: entry.coalescingKey, founder: entry)
        tickets[entry.id] = .waiting(job: entry.id)
        if let key = entry.coalescingKey { byKey[key] = entry.id }
        if entry.holdsSlot {
            queues[entry.priority.rawValue].append(entry.id)
        } else {
            enqueueUnslotted(entry.id)
        }
    }

    mutating func popNext(delayableAllowed: Bool, onlyDelayable: Bool = false) -> ID? {
        for priority in Priority.allCases.reversed() {
            if onlyDelayable, priority > Self.delayable { continue }
            if priority <= Self.delayable, !delayableAllowed { return nil }
            let index = priority.rawValue
            // Drop stale heads cheaply, then scan past paused categories.
            while let head = queues[index].first, !isLive(head, at: priority) {
                queues[index].removeFirst()
            }
            var position = queues[index].startIndex
            while position < queues[index].endIndex {
                let id = queues[index][position]
                if !isLive(id, at: priority) {
                    queues[index].remove(at: position)
                    continue
                }
                if let job = jobs[id], !paused.contains(job.category) {
                    queues[index].remove(at: position)
                    return id
                }
                position += 1
            }
        }
        return nil
    }

    private func isLive(_ id: ID, at priority: Priority) -> Bool {
        guard let job = jobs[id] else { return false }
        return !running.contains(id) && job.priority == priority
    }
}
