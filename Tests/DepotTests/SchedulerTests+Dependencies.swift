@testable import Depot
import Testing

/// The scheduler's dependencies (`Scheduler+Dependencies.swift`): a ticket
/// waits for its dependencies to succeed and fails when one does not.
extension SchedulerTests {
    @Test func dependentWaitsForSuccess() {
        var scheduler = Scheduler(limit: 4)
        _ = scheduler.enqueue(entry(1))
        #expect(starts(scheduler.enqueue(entry(2, after: [1]))).isEmpty)
        let actions = scheduler.finish(job: id(1), outcome: .succeeded)
        #expect(actions == [.resolve(job: id(1), tickets: [id(1)], .succeeded), .start(job: id(2))])
    }

    @Test func dependentWaitsForAllDependencies() {
        var scheduler = Scheduler(limit: 4)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.enqueue(entry(2))
        _ = scheduler.enqueue(entry(3, after: [1, 2]))
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)).isEmpty)
        #expect(starts(scheduler.finish(job: id(2), outcome: .succeeded)) == [3])
    }

    @Test func dependencyFailureCascades() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.enqueue(entry(2, after: [1]))
        _ = scheduler.enqueue(entry(3, after: [2]))
        _ = scheduler.enqueue(entry(4))
        let actions = scheduler.finish(job: id(1), outcome: .failed)
        #expect(actions == [
            .resolve(job: id(1), tickets: [id(1)], .failed),
            .dependencyFailed(id(2), cause: id(1)),
            .dependencyFailed(id(3), cause: id(2)),
            .start(job: id(4)),
        ])
    }

    @Test func cancelledDependencyFailsDependents() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.enqueue(entry(2, after: [1]))
        #expect(scheduler.cancel(id(1)) == [.cancelled(id(1)), .dependencyFailed(id(2), cause: id(1))])
        #expect(scheduler.isIdle)
    }

    @Test func dependentFailingOnOneDependencyStopsWaitingForTheOthers() {
        var scheduler = Scheduler(limit: 4)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.enqueue(entry(2))
        _ = scheduler.enqueue(entry(3, after: [1, 2]))
        _ = scheduler.finish(job: id(1), outcome: .failed)
        // Ticket 2 succeeding later must not resurrect ticket 3.
        let actions = scheduler.finish(job: id(2), outcome: .succeeded)
        #expect(actions == [.resolve(job: id(2), tickets: [id(2)], .succeeded)])
        #expect(scheduler.isIdle)
    }
}
