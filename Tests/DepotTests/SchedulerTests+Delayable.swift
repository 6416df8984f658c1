@testable import Depot
import Testing

/// The scheduler's delayable admission (`Scheduler+Delayable.swift`): delayable
/// work leaves room for important work and, under pacing, starts one job after
/// another until the one before it is drained (at most the budget's bytes
/// still to come).
extension SchedulerTests {
    @Test func delayableWorkLeavesASlotAndYieldsToImportantWork() {
        var scheduler = Scheduler(limit: 4)
        // Given only low-priority work, it takes all slots but one
        var started: [UInt64] = []
        for n in 1...10 { started += starts(scheduler.enqueue(entry(UInt64(n), .low))) }
        #expect(started == [1, 2, 3])
        // When important work arrives, it starts at once in the free slot
        #expect(starts(scheduler.enqueue(entry(20, .high))) == [20])
        // Then while it runs, finished low work is not replaced beyond one in flight
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)).isEmpty)
        #expect(starts(scheduler.finish(job: id(2), outcome: .succeeded)).isEmpty)
        #expect(starts(scheduler.finish(job: id(3), outcome: .succeeded)) == [4])
        // And when it ends, low work fills the slots again (all but one)
        #expect(starts(scheduler.finish(job: id(20), outcome: .succeeded)) == [5, 6])
    }

    @Test func pacedDelayableJobsStartOneAfterAnother() {
        var scheduler = Scheduler(limit: 6, pacesDelayable: true)
        // Given 10 low-priority jobs, one starts
        var started: [UInt64] = []
        for n in 1...10 { started += starts(scheduler.enqueue(entry(UInt64(n), .low))) }
        #expect(started == [1])
        #expect(scheduler.isHeavy(id(1)))
        // When it is drained, the next starts beside it
        #expect(starts(scheduler.drained(job: id(1))) == [2])
        #expect(!scheduler.isHeavy(id(1)))
        // Drained twice is a no-op; ending a drained job starts nothing new
        #expect(scheduler.drained(job: id(1)).isEmpty)
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)).isEmpty)
        // Ending a heavy job lets the next one start
        #expect(starts(scheduler.finish(job: id(2), outcome: .succeeded)) == [3])
    }

    @Test func importantWorkIsNotPaced() {
        var scheduler = Scheduler(limit: 6, pacesDelayable: true)
        for n in 1...3 { _ = scheduler.enqueue(entry(UInt64(n), .low)) }
        var started: [UInt64] = []
        for n in 10...13 { started += starts(scheduler.enqueue(entry(UInt64(n), .normal))) }
        #expect(started == [10, 11, 12, 13])
        #expect(scheduler.runningJobCount == 5)
    }

    @Test func atALimitOfTwoPacingKeepsTheSecondSlotForImportantWork() {
        // Unpaced, two low jobs fill both slots and important work waits for one to end.
        var unpaced = Scheduler(limit: 2)
        for n in 1...5 { _ = unpaced.enqueue(entry(UInt64(n), .low)) }
        #expect(starts(unpaced.enqueue(entry(10, .high))).isEmpty)
        // Paced, the second slot is free until the first job is drained
        var paced = Scheduler(limit: 2, pacesDelayable: true)
        for n in 1...5 { _ = paced.enqueue(entry(UInt64(n), .low)) }
        #expect(starts(paced.enqueue(entry(10, .high))) == [10])
    }

    @Test func aPromotedJobNoLongerHoldsDelayableWorkBack() {
        var scheduler = Scheduler(limit: 6, pacesDelayable: true)
        _ = scheduler.enqueue(Scheduler.Entry(id: id(1), priority: .low, coalescingKey: "a"))
        _ = scheduler.enqueue(entry(2, .low))
        // When a normal-priority ticket joins the running job, it is important work
        let actions = scheduler.enqueue(Scheduler.Entry(id: id(3), priority: .normal, coalescingKey: "a"))
        #expect(!scheduler.isHeavy(id(1)))
        #expect(starts(actions) == [2])
    }

    @Test func aJobPromotedToUrgentGoesOnHoldingDelayableWorkBack() {
        var scheduler = Scheduler(limit: 6, pacesDelayable: true)
        _ = scheduler.enqueue(Scheduler.Entry(id: id(1), priority: .low, coalescingKey: "a"))
        _ = scheduler.enqueue(entry(2, .low))
        let actions = scheduler.enqueue(Scheduler.Entry(id: id(3), priority: .high, coalescingKey: "a"))
        #expect(scheduler.isHeavy(id(1)))
        #expect(starts(actions).isEmpty)
        #expect(starts(scheduler.drained(job: id(1))).isEmpty)
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [2])
    }

    @Test func turningPacingOffStartsWhatItHeldBack() {
        var scheduler = Scheduler(limit: 4, pacesDelayable: true)
        for n in 1...5 { _ = scheduler.enqueue(entry(UInt64(n), .low)) }
        #expect(scheduler.runningJobCount == 1)
        // Off, the usual rule applies: all slots but one
        #expect(starts(scheduler.setPacing(false)) == [2, 3])
    }

    @Test func budgetIsRoundTripsOfTheBandwidthDelayProduct() {
        let pacing = DelayablePacing.bandwidthDelay(roundTrips: 2, minimumBytes: 1_000)
        // 1 Mbit/s × 100 ms = 12,500 bytes; two round trips 25,000
        #expect(pacing.budget(bandwidth: 1_000_000, minimumRTT: .milliseconds(100)) == 25_000)
        #expect(pacing.budget(bandwidth: 1_000_000, minimumRTT: .microseconds(100)) == 1_000)
        #expect(pacing.budget(bandwidth: nil, minimumRTT: .milliseconds(100)) == nil)
        #expect(DelayablePacing.off.budget(bandwidth: 1_000_000, minimumRTT: .milliseconds(100)) == nil)
        #expect(!DelayablePacing.off.isOn)
        #expect(DelayablePacing.default.isOn)
    }

    @Test func urgentWorkHoldsDelayableWorkBackUntilItEnds() {
        var scheduler = Scheduler(limit: 6, pacesDelayable: true)
        for n in 1...5 { _ = scheduler.enqueue(entry(UInt64(n), .low)) }
        // Given a high-priority job beside the running low one
        #expect(starts(scheduler.enqueue(entry(10, .high))) == [10])
        #expect(scheduler.isHeavy(id(10)))
        // When the low job ends, no delayable job starts while the urgent one is heavy
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)).isEmpty)
        // Nor when it says it is drained (only delayable jobs drain)
        #expect(starts(scheduler.drained(job: id(10))).isEmpty)
        // Then once it ends, the next starts
        #expect(starts(scheduler.finish(job: id(10), outcome: .succeeded)) == [2])
    }

    @Test func normalWorkDoesNotHoldDelayableWorkBack() {
        var scheduler = Scheduler(limit: 6, pacesDelayable: true)
        for n in 1...5 { _ = scheduler.enqueue(entry(UInt64(n), .low)) }
        #expect(starts(scheduler.enqueue(entry(10, .normal))) == [10])
        #expect(!scheduler.isHeavy(id(10)))
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [2])
    }
}
