@testable import Depot
import Testing

/// Long-lived streams hold no slot: `Scheduler+Unslotted`.
extension SchedulerTests {
    func stream(_ n: UInt64, _ priority: Priority = .normal, category: OperationCategory = .default) -> Scheduler.Entry {
        Scheduler.Entry(id: id(n), priority: priority, category: category, holdsSlot: false)
    }

    @Test func aStreamStartsBesideAFullLimitAndTakesNoSlot() {
        var scheduler = Scheduler(limit: 1)
        #expect(starts(scheduler.enqueue(entry(1))) == [1])
        // The limit is full, yet the stream starts at once…
        #expect(starts(scheduler.enqueue(stream(2))) == [2])
        // …and the next ordinary job still waits for the one slot, not for the stream.
        #expect(starts(scheduler.enqueue(entry(3))).isEmpty)
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [3])
        #expect(scheduler.runningSlottedJobCount == 1)
        #expect(scheduler.runningJobCount == 2)
    }

    @Test func aStreamWaitsWhileNothingMayRunAndStartsWhenTheLimitOpens() {
        // Offline (limit 0), a stream waits like other work.
        var scheduler = Scheduler(limit: 0)
        #expect(scheduler.enqueue(stream(1)).isEmpty)
        #expect(starts(scheduler.setLimit(1)) == [1])
    }

    @Test func aRequeuedStreamGoesBackToItsOwnQueue() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(stream(1))
        _ = scheduler.setLimit(0)
        // It found no network: back in line, holding nothing.
        #expect(scheduler.requeue(job: id(1)).isEmpty)
        #expect(scheduler.runningJobCount == 0)
        _ = scheduler.enqueue(entry(2))
        // Back online: both start, the stream holding no slot.
        #expect(Set(starts(scheduler.setLimit(1))) == [1, 2])
    }

    @Test func aStreamInAPausedCategoryWaitsUntilItResumes() {
        var scheduler = Scheduler(limit: 2)
        _ = scheduler.pause(category: .timeline)
        #expect(scheduler.enqueue(stream(1, category: .timeline)).isEmpty)
        #expect(starts(scheduler.resume(category: .timeline)) == [1])
    }

    @Test func aRunningStreamNeitherBlocksATrickleNorCountsAsImportantWork() {
        var scheduler = Scheduler(limit: 3)
        _ = scheduler.enqueue(stream(1, .veryHigh))
        // Delayable work sees no important work beside it: the stream is not one.
        #expect(scheduler.runningMix.important == false)
        _ = scheduler.pause(category: .images)
        _ = scheduler.enqueue(entry(2, .low, category: .images))
        // Nothing else runs but the stream: the paused image may trickle.
        #expect(starts(scheduler.trickle(from: [.images])) == [2])
    }

    @Test func shutdownCancelsARunningStream() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(stream(1))
        let actions = scheduler.shutdown()
        #expect(actions.contains(.cancelled(id(1))))
        #expect(actions.contains(.abort(job: id(1))))
        _ = scheduler.finish(job: id(1), outcome: .cancelled)
        #expect(scheduler.isIdle)
        #expect(scheduler.unslotted.isEmpty)
    }

    @Test func anUrgentStreamHoldsNoDelayableRangeBack() {
        var scheduler = Scheduler(limit: 4, pacesDelayable: true)
        _ = scheduler.enqueue(stream(1, .high))
        _ = scheduler.enqueue(entry(2, .low))
        // An urgent fetch holds the image's next range back; the stream, urgent for hours, does not.
        #expect(scheduler.mayContinueRanges(of: id(2)))
        _ = scheduler.enqueue(entry(3, .high))
        #expect(!scheduler.mayContinueRanges(of: id(2)))
    }

    @Test func aStreamThatRetriedHoldsNoDelayableWorkBack() {
        var scheduler = Scheduler(limit: 4, pacesDelayable: true)
        _ = scheduler.enqueue(stream(1, .high))
        // Its connection dropped: it backs off, then tries again.
        _ = scheduler.rest(job: id(1))
        scheduler.wake(job: id(1))
        #expect(scheduler.heavy.isEmpty)
        #expect(starts(scheduler.enqueue(entry(2, .low))) == [2])
    }
}
