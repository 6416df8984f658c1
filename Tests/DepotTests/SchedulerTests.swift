@testable import Depot
import Seeded
import Testing

@Suite struct SchedulerTests {
    typealias ID = Ticket.ID
    func id(_ n: UInt64) -> ID { ID(rawValue: n) }

    func entry(_ n: UInt64, _ priority: Priority = .normal, category: OperationCategory = .default, key: String? = nil, exit: ExitPolicy = .cancel, after: [UInt64] = []) -> Scheduler.Entry {
        Scheduler.Entry(id: id(n), priority: priority, category: category, exitPolicy: exit, coalescingKey: key, dependencies: after.map(id))
    }

    func starts(_ actions: [Scheduler.Action]) -> [UInt64] {
        actions.compactMap { if case .start(let job) = $0 { return job.rawValue } else { return nil } }
    }

    // MARK: Priority and FIFO

    @Test func startsHighestPriorityFirstAndFIFOWithin() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1, .low))
        _ = scheduler.enqueue(entry(2, .normal))
        _ = scheduler.enqueue(entry(3, .veryHigh))
        _ = scheduler.enqueue(entry(4, .normal))
        _ = scheduler.enqueue(entry(5, .veryLow))
        _ = scheduler.enqueue(entry(6, .high))
        // When the limit opens, everything starts in priority order, FIFO within;
        // delayable work (low and below) runs one at a time beside important work.
        #expect(starts(scheduler.setLimit(10)) == [3, 6, 2, 4, 1])
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [5])
    }

    @Test func respectsTheConcurrencyLimit() {
        var scheduler = Scheduler(limit: 2)
        var started: [UInt64] = []
        for n in 1...5 { started += starts(scheduler.enqueue(entry(UInt64(n)))) }
        #expect(started == [1, 2])
        #expect(scheduler.runningJobCount == 2)
        #expect(scheduler.queuedJobCount == 3)
        // Each finish frees exactly one slot.
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)) == [3])
        #expect(starts(scheduler.finish(job: id(2), outcome: .failed)) == [4])
    }

    @Test func raisingTheLimitStartsAtOnceLoweringStopsNothing() {
        var scheduler = Scheduler(limit: 1)
        for n in 1...4 { _ = scheduler.enqueue(entry(UInt64(n))) }
        #expect(starts(scheduler.setLimit(3)) == [2, 3])
        #expect(scheduler.setLimit(1).isEmpty)
        #expect(scheduler.runningJobCount == 3)
        // Below the new limit only after two finish.
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)).isEmpty)
        #expect(starts(scheduler.finish(job: id(2), outcome: .succeeded)).isEmpty)
        #expect(starts(scheduler.finish(job: id(3), outcome: .succeeded)) == [4])
    }

    @Test func limitZeroStartsNothing() {
        var scheduler = Scheduler(limit: 0)
        #expect(scheduler.enqueue(entry(1, .veryHigh)).isEmpty)
        #expect(scheduler.queuedJobCount == 1)
    }

    // MARK: Cancellation

    @Test func cancellingAQueuedTicketRemovesIt() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.enqueue(entry(2))
        #expect(scheduler.cancel(id(2)) == [.cancelled(id(2))])
        #expect(starts(scheduler.finish(job: id(1), outcome: .succeeded)).isEmpty)
        #expect(scheduler.isIdle)
    }

    @Test func cancellingARunningTicketAbortsItsTransferButKeepsTheSlotUntilItEnds() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1))
        _ = scheduler.enqueue(entry(2))
        #expect(scheduler.cancel(id(1)) == [.cancelled(id(1)), .abort(job: id(1))])
        #expect(scheduler.runningJobCount == 1)
        // The aborted task reports its end; only then does the next start, and nobody is resolved twice.
        let actions = scheduler.finish(job: id(1), outcome: .cancelled)
        #expect(actions == [.start(job: id(2))])
    }

    @Test func cancelCategoryHitsQueuedRunningAndBlocked() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1, category: .images))
        _ = scheduler.enqueue(entry(2, category: .images))
        _ = scheduler.enqueue(entry(3))
        _ = scheduler.enqueue(entry(4, category: .images, after: [3]))
        let actions = scheduler.cancel(category: .images)
        #expect(Set(actions.filter { if case .cancelled = $0 { true } else { false } }) == [.cancelled(id(1)), .cancelled(id(2)), .cancelled(id(4))])
        #expect(actions.contains(.abort(job: id(1))))
        #expect(scheduler.isPending(id(3)))
    }

    @Test func cancelCategoryUsesEachTicketsOwnCategory() {
        var scheduler = Scheduler(limit: 0)
        _ = scheduler.enqueue(entry(1, category: .timeline, key: "k"))
        _ = scheduler.enqueue(entry(2, category: .images, key: "k"))
        #expect(scheduler.cancel(category: .images) == [.cancelled(id(2))])
        #expect(scheduler.isPending(id(1)))
    }

    @Test func cancelAllResolvesEveryTicketOnce() {
        var scheduler = Scheduler(limit: 2)
        for n in 1...5 { _ = scheduler.enqueue(entry(UInt64(n), key: n == 5 ? "k1" : nil)) }
        _ = scheduler.enqueue(entry(6, key: "k1"))
        _ = scheduler.enqueue(entry(7, after: [1]))
        let actions = scheduler.cancelAll()
        let cancelled = actions.compactMap { if case .cancelled(let id) = $0 { id.rawValue } else { nil } }
        #expect(cancelled.sorted() == [1, 2, 3, 4, 5, 6, 7])
        #expect(Set(cancelled).count == cancelled.count)
        #expect(!scheduler.isIdle)  // two aborted transfers still running
        _ = scheduler.finish(job: id(1), outcome: .cancelled)
        _ = scheduler.finish(job: id(2), outcome: .cancelled)
        #expect(scheduler.isIdle)
    }

    // MARK: Shutdown

    @Test func shutdownCancelsCancellableWorkAndKeepsFinishWork() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1, exit: .cancel))
        _ = scheduler.enqueue(entry(2, .veryHigh, exit: .finish))
        _ = scheduler.enqueue(entry(3, exit: .cancel))
        let actions = scheduler.shutdown()
        #expect(actions.contains(.cancelled(id(1))))
        #expect(actions.contains(.abort(job: id(1))))
        #expect(actions.contains(.cancelled(id(3))))
        #expect(!actions.contains(.cancelled(id(2))))
        #expect(scheduler.isShuttingDown)
        #expect(starts(scheduler.finish(job: id(1), outcome: .cancelled)) == [2])
    }

    /// Tickets that share a job keep their own exit policy and category.
    @Test func sharedJobsKeepEachTicketsExitPolicyAndCategory() {
        var scheduler = Scheduler(limit: 1)
        _ = scheduler.enqueue(entry(1, key: "k"))
        _ = scheduler.enqueue(entry(2, key: "k", exit: .finish))
        _ = scheduler.enqueue(entry(3, category: .images, key: "k"))
        _ = scheduler.enqueue(entry(4, category: .images, key: "k", exit: .finish))
        #expect(scheduler.waiters(of: id(1)) == [id(1), id(2), id(3), id(4)])

        #expect(scheduler.cancel(category: .images) == [.cancelled(id(3)), .cancelled(id(4))])
        let actions = scheduler.shutdown()
        #expect(actions == [.cancelled(id(1))], "ticket 2 must finish, so the job goes on")
        #expect(scheduler.waiters(of: id(1)) == [id(2)])
    }

    // MARK: Invariants under random event sequences

    @Test(arguments: 0..<40)
    func randomSequencesKeepTheInvariants(seed: Int) {
        // Offset as the tests were tuned with: the same sequences as before.
        var random = SplitMix64(seed: UInt64(seed) &+ 0x9E37_79B9_7F4A_7C15)
        var scheduler = Scheduler(limit: Int(random.next() % 4))
        var next: UInt64 = 1
        var resolvedCount: [ID: Int] = [:]
        var running: Set<ID> = []
        var pausedModel: Set<OperationCategory> = []
        let categories: [OperationCategory] = [.default, .images, .timeline]

        func check(_ actions: [Scheduler.Action]) {
            var startedNow: [ID] = []
            for action in actions {
                switch action {
                case .start(let job):
                    #expect(!running.contains(job))
                    running.insert(job)
                    startedNow.append(job)
                case .resolve(_, let tickets, _):
                    for ticket in tickets { resolvedCount[ticket, default: 0] += 1 }
                case .cancelled(let ticket), .dependencyFailed(let ticket, _):
                    resolvedCount[ticket, default: 0] += 1
                default: break
                }
            }
            #expect(scheduler.runningJobCount == running.count)
            // Nothing started from a paused category, and nothing left waiting outranks
            // what started, except the one delayable job allowed beside important work.
            let waiting = scheduler.queuedJobs.filter { !scheduler.paused.contains($0.category) }
            let delayableRunning = running.filter { (scheduler.priority(of: $0) ?? .normal) <= Scheduler.delayable }.count
            // The kept count matches a scan (promotion, requeue and finish all move it).
            #expect(scheduler.runningDelayableJobCount == delayableRunning)
            for job in startedNow {
                let priority = scheduler.priority(of: job)!
                #expect(!pausedModel.contains(scheduler.category(of: job)!))
                let outranked = !waiting.allSatisfy { $0.priority <= priority }
                #expect(!outranked || (priority <= Scheduler.delayable && delayableRunning == 1), "a more urgent job was left waiting")
            }
        }

        for _ in 0..<300 {
            switch random.next() % 10 {
            case 0, 1, 2, 3:
                let deps = (0..<Int(random.next() % 3)).compactMap { _ in next > 1 ? ID(rawValue: 1 + random.next() % (next - 1)) : nil }
                let e = Scheduler.Entry(
                    id: ID(rawValue: next),
                    priority: Priority(rawValue: Int(random.next() % 5))!,
                    category: categories[Int(random.next() % 3)],
                    exitPolicy: random.next() % 4 == 0 ? .finish : .cancel,
                    coalescingKey: random.next() % 2 == 0 ? "k\(random.next() % 4)" : nil,
                    dependencies: deps
                )
                next += 1
                let before = running.count
                let actions = scheduler.enqueue(e)
                check(actions)
                // Nothing starts beyond the limit (already-running jobs may exceed it after a lowering).
                if running.count > before { #expect(running.count <= scheduler.limit) }
            case 4, 5:
                if let job = running.randomElement(using: &random) {
                    running.remove(job)
                    if random.next() % 4 == 0 {
                        // The transfer found no network: back to the queue (or cancelled if nobody waits).
                        check(scheduler.requeue(job: job))
                    } else {
                        let outcome: Scheduler.Outcome = [.succeeded, .failed, .cancelled][Int(random.next() % 3)]
                        check(scheduler.finish(job: job, outcome: outcome))
                    }
                }
            case 6:
                check(scheduler.cancel(ID(rawValue: 1 + random.next() % next)))
            case 7:
                let category = categories[Int(random.next() % 3)]
                if random.next() % 2 == 0 {
                    pausedModel.insert(category)
                    check(scheduler.pause(category: category))
                } else {
                    pausedModel.remove(category)
                    check(scheduler.resume(category: category))
                }
            case 8:
                check(scheduler.setLimit(Int(random.next() % 5)))
            case 9 where random.next() % 8 == 0 && !scheduler.isShuttingDown:
                check(scheduler.shutdown())
            default:
                check(scheduler.cancel(category: categories[Int(random.next() % 3)]))
            }
            #expect(scheduler.paused == pausedModel)
        }
        // Drain: lift every restriction, finish everything that runs.
        for category in categories {
            pausedModel.remove(category)
            check(scheduler.resume(category: category))
        }
        check(scheduler.setLimit(1000))
        while let job = running.first {
            running.remove(job)
            check(scheduler.finish(job: job, outcome: .succeeded))
        }
        #expect(scheduler.isIdle)
        // Every ticket was resolved exactly once.
        #expect(resolvedCount.count == Int(next - 1))
        #expect(resolvedCount.values.allSatisfy { $0 == 1 })
    }
}
