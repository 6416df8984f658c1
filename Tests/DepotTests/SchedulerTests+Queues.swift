@testable import Depot
import Testing

/// The scheduler's queues and coalescing (`Scheduler+Queues.swift`): paused
/// categories, trickling, requeued jobs, and tickets that share a job.
extension SchedulerTests {
    // MARK: Pause, resume and trickle

    @Test func pausedCategoryWaitsWhileOthersPass() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.pause(category: .images)
        #expect(starts(scheduler.enqueue(entry(1, .veryHigh, category: .images))).isEmpty)
        #expect(starts(scheduler.enqueue(entry(2, .low))) == [2])
        #expect(starts(scheduler.finish(job: id(2), outcome: .succeeded)).isEmpty)
        #expect(starts(scheduler.resume(category: .images)) == [1])
    }

    /// Paused images trickle one at a time when nothing else runs, and the
    /// trickling one holds no slot: a post that arrives starts beside it, not
    /// behind it, even at a limit of 1.
    @Test func tricklingWorkHoldsNoSlot() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.pause(category: .images)
        _ = scheduler.enqueue(entry(1, .low, category: .images))
        _ = scheduler.enqueue(entry(2, .low, category: .images))
        #expect(starts(scheduler.trickle(from: [.images])) == [1])
        #expect(scheduler.runningDelayableJobCount == 1)
        #expect(starts(scheduler.trickle(from: [.images])).isEmpty, "one at a time")
        #expect(starts(scheduler.enqueue(entry(3, .veryHigh))) == [3])
        #expect(starts(scheduler.enqueue(entry(4, .normal))).isEmpty, "the post took the one slot")
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)).isEmpty, "the trickle's end frees no slot")
        #expect(scheduler.runningDelayableJobCount == 0)
        #expect(starts(scheduler.finish(job: id(3), outcome: .succeeded)) == [4])
        #expect(starts(scheduler.finish(job: id(4), outcome: .succeeded)).isEmpty)
        #expect(starts(scheduler.trickle(from: [.images])) == [2])
    }

    /// When its category resumes, a trickling job holds a slot again: the limit stands.
    @Test func aResumedTrickleCountsAgainstTheLimit() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.pause(category: .images)
        _ = scheduler.enqueue(entry(1, .low, category: .images))
        _ = scheduler.enqueue(entry(2, .low, category: .images))
        #expect(starts(scheduler.trickle(from: [.images])) == [1])
        #expect(starts(scheduler.resume(category: .images)).isEmpty, "1 runs in the one slot")
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [2])
    }

    @Test func pauseDoesNotStopRunningWork() {
        var scheduler = Scheduler(limit: 2)
        #expect(starts(scheduler.enqueue(entry(1, category: .images))) == [1])
        #expect(scheduler.pause(category: .images).isEmpty)  // no abort, no cancel
        #expect(scheduler.runningJobCount == 1)
        // The running job still completes normally while its category is paused.
        #expect(scheduler.finish(job: id(1), outcome: .succeeded) == [.resolve(job: id(1), tickets: [id(1)], .succeeded)])
    }

    // MARK: Requeue

    @Test func requeuedJobWaitsBehindItsPeersSoProbesTakeTurns() {
        var scheduler = Scheduler(limit: 1)
        #expect(starts(scheduler.enqueue(entry(1, .normal))) == [1])
        _ = scheduler.enqueue(entry(2, .normal))
        _ = scheduler.enqueue(entry(3, .high))
        _ = scheduler.setLimit(0)
        // Given the running job found no network and went back to the queue
        #expect(starts(scheduler.requeue(job: id(1))).isEmpty)
        #expect(scheduler.isPending(id(1)))
        // When room returns, more urgent work goes first, then its peer that waited, then it
        #expect(starts(scheduler.setLimit(1)) == [3])
        #expect(starts(scheduler.finish(job: id(3), outcome: .succeeded)) == [2])
        #expect(starts(scheduler.finish(job: id(2), outcome: .succeeded)) == [1])
        // still with its ticket
        let finished = scheduler.finish(job: id(1), outcome: .succeeded)
        #expect(finished.contains(.resolve(job: id(1), tickets: [id(1)], .succeeded)))
    }

    // MARK: Coalescing and promotion

    @Test func identicalKeysShareOneJob() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1, key: "GET /feed"))
        for n in 2...5 {
            #expect(scheduler.enqueue(entry(UInt64(n), key: "GET /feed")) == [.coalesced(id(UInt64(n)), into: id(1))])
        }
        #expect(starts(scheduler.setLimit(4)) == [1])
        #expect(scheduler.finish(job: id(1), outcome: .succeeded).first == .resolve(job: id(1), tickets: [1, 2, 3, 4, 5].map(id), .succeeded))
    }

    @Test func coalescesIntoRunningJobAndFreesKeyAfterwards() {
        var scheduler = Scheduler(limit: 2)
        _ = scheduler.enqueue(entry(1, key: "k"))
        #expect(scheduler.enqueue(entry(2, key: "k")) == [.coalesced(id(2), into: id(1))])
        _ = scheduler.finish(job: id(1), outcome: .succeeded)
        // A new request after the first finished is a new transfer.
        #expect(starts(scheduler.enqueue(entry(3, key: "k"))) == [3])
    }

    @Test func moreUrgentJoinerPromotesTheQueuedJob() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1, .normal))
        _ = scheduler.enqueue(entry(2, .low, key: "avatar"))
        _ = scheduler.enqueue(entry(3, .normal))
        #expect(scheduler.enqueue(entry(4, .high, key: "avatar")) == [.coalesced(id(4), into: id(2)), .promoted(job: id(2), from: .low, to: .high)])
        #expect(scheduler.priority(of: id(2)) == .high)
        #expect(starts(scheduler.setLimit(10)) == [2, 1, 3])
    }

    /// A running image promoted by an urgent joiner is important work now:
    /// it no longer counts among the delayable jobs.
    @Test func aRunningJobPromotedAboveDelayableCountsAsImportant() {
        var scheduler = Scheduler(limit: 3)
        #expect(starts(scheduler.enqueue(entry(1, .low, key: "avatar"))) == [1])
        #expect(scheduler.runningDelayableJobCount == 1)
        #expect(scheduler.enqueue(entry(2, .high, key: "avatar")) == [.coalesced(id(2), into: id(1)), .promoted(job: id(1), from: .low, to: .high)])
        #expect(scheduler.runningDelayableJobCount == 0)
        // Beside important work, one delayable job runs, and only one.
        #expect(starts(scheduler.enqueue(entry(3, .low))) == [3])
        #expect(starts(scheduler.enqueue(entry(4, .low))).isEmpty)
        #expect(scheduler.runningDelayableJobCount == 1)
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [4])
        #expect(scheduler.runningDelayableJobCount == 2)
    }

    @Test func lessUrgentJoinerDoesNotDemote() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1, .high, key: "k"))
        #expect(scheduler.enqueue(entry(2, .veryLow, key: "k")) == [.coalesced(id(2), into: id(1))])
        #expect(scheduler.priority(of: id(1)) == .high)
    }

    @Test func cancellingOneWaiterKeepsTheSharedTransfer() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1, key: "k"))
        _ = scheduler.enqueue(entry(2, key: "k"))
        #expect(scheduler.cancel(id(1)) == [.cancelled(id(1))])
        #expect(scheduler.finish(job: id(1), outcome: .succeeded).first == .resolve(job: id(1), tickets: [id(2)], .succeeded))
    }

    @Test func cancellingTheCreatorOfAQueuedSharedJobKeepsItForTheOthers() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1, key: "k"))
        _ = scheduler.enqueue(entry(2, key: "k"))
        _ = scheduler.cancel(id(1))
        #expect(starts(scheduler.setLimit(1)) == [1])
        #expect(scheduler.waiters(of: id(1)) == [id(2)])
    }

    @Test func blockedTicketDoesNotCoalesceUntilReady() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.enqueue(entry(2, key: "k"))
        #expect(scheduler.enqueue(entry(3, key: "k", after: [1])).isEmpty)
        _ = scheduler.setLimit(1)
        // 1 runs; when it succeeds, 3 becomes ready and joins 2's queued job.
        let actions = scheduler.finish(job: id(1), outcome: .succeeded)
        #expect(actions.contains(.coalesced(id(3), into: id(2))))
    }
}
