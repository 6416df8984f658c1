@testable import Depot
import Testing

/// The scheduler's credential holds (`Scheduler+CredentialHolds.swift`): a job
/// requeued `holding` waits out of the queues, with no slot, until
/// `releaseHeld()` puts it back.
extension SchedulerTests {
    @Test func aHeldJobFreesItsSlotAndWaitsUntilReleased() {
        var scheduler = Scheduler(limit: 1)
        #expect(starts(scheduler.enqueue(entry(1))) == [1])
        _ = scheduler.enqueue(entry(2))
        // Given the running job found it needs credentials that are not there
        #expect(starts(scheduler.requeue(job: id(1), holding: true)) == [2], "the held job holds no slot")
        #expect(scheduler.heldJobCount == 1)
        #expect(scheduler.isPending(id(1)))
        #expect(!scheduler.isRunning(id(1)))
        // When the slot frees, the held job still waits
        #expect(starts(scheduler.finish(job: id(2), outcome: .succeeded)).isEmpty)
        // Then once released, it runs, its ticket still waiting
        #expect(starts(scheduler.releaseHeld()) == [1])
        #expect(scheduler.heldJobCount == 0)
        #expect(scheduler.finish(job: id(1), outcome: .succeeded) == [.resolve(job: id(1), tickets: [id(1)], .succeeded)])
    }

    @Test func releasedJobsRunOldestFirstBehindWhatIsQueued() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.requeue(job: id(1), holding: true)
        _ = scheduler.enqueue(entry(2))
        #expect(starts(scheduler.requeue(job: id(2), holding: true)).isEmpty)
        #expect(starts(scheduler.enqueue(entry(3))) == [3])
        _ = scheduler.enqueue(entry(4))
        #expect(scheduler.heldJobCount == 2)
        // When the held jobs are released while 3 runs, they join the tail of the queue
        #expect(starts(scheduler.releaseHeld()).isEmpty)
        #expect(starts(scheduler.finish(job: id(3), outcome: .succeeded)) == [4])
        #expect(starts(scheduler.finish(job: id(4), outcome: .succeeded)) == [1])
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [2])
    }

    @Test func aCancelledHeldJobIsNotReleased() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.requeue(job: id(1), holding: true)
        // A held job is not running: cancelling its only ticket aborts nothing
        #expect(scheduler.cancel(id(1)) == [.cancelled(id(1))])
        #expect(scheduler.heldJobCount == 0)
        #expect(scheduler.releaseHeld().isEmpty)
        #expect(scheduler.isIdle)
    }

    @Test func aRunningJobNobodyWaitsForIsNotHeld() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1))
        #expect(scheduler.cancel(id(1)) == [.cancelled(id(1)), .abort(job: id(1))])
        // When the aborted transfer reports it needs credentials, it ends instead
        #expect(scheduler.requeue(job: id(1), holding: true).isEmpty)
        #expect(scheduler.heldJobCount == 0)
        #expect(scheduler.isIdle)
    }

    @Test func aMoreUrgentJoinerPromotesAHeldJobButDoesNotQueueIt() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1, key: "k"))
        _ = scheduler.requeue(job: id(1), holding: true)
        // When an urgent ticket joins the held job, it is promoted and stays held
        #expect(scheduler.enqueue(entry(2, .high, key: "k")) == [.coalesced(id(2), into: id(1)), .promoted(job: id(1), from: .normal, to: .high)])
        #expect(scheduler.heldJobCount == 1)
        // Then it runs at its new priority once released, for both tickets
        #expect(starts(scheduler.releaseHeld()) == [1])
        #expect(scheduler.priority(of: id(1)) == .high)
        #expect(scheduler.finish(job: id(1), outcome: .succeeded) == [.resolve(job: id(1), tickets: [id(1), id(2)], .succeeded)])
    }
}
