import Foundation
import Synchronization
import Testing
@testable import DepotStore

@Suite struct OverlappedIngestTests {
    /// Many ingests at once, each producer waiting on something (the next
    /// bytes, a full pipe), hold none of Swift concurrency's threads: a
    /// user-initiated task runs at once and is what lets them go. (They ran on
    /// the global queue such tasks run on, and the task waited behind them
    /// while the pool grew a thread at a time: past the time limit.)
    @Test(.timeLimit(.minutes(1)))
    func waitingProducersDoNotHoldUpTasks() async throws {
        let producers = WaitingProducers(count: max(64, 8 * ProcessInfo.processInfo.activeProcessorCount))
        async let outcomes: [Bool] = withTaskGroup(of: Bool.self) { group in
            for _ in 0..<producers.count {
                group.addTask { await producers.ingest() }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        await producers.firstStarted()
        await Task.detached(priority: .userInitiated) { producers.release() }.value

        let released = await outcomes
        #expect(released.count == producers.count)
        #expect(released.allSatisfy { $0 }, "a producer gave up waiting: the task could not run while they waited")
    }

    /// When the consumer stops early (a write fails), `run` returns only once
    /// `produce` has returned: whatever the producer holds (a streamed body's
    /// file, a parser) is no longer in use. (It returned as soon as the
    /// producer was told to stop, while it was still unwinding.)
    @Test func runReturnsAfterTheProducerHasReturned() throws {
        struct WriteFailed: Error {}
        let exited = Mutex(false)
        #expect(throws: WriteFailed.self) {
            try OverlappedIngest.run(produce: { yield in
                defer {
                    // Still busy after being told to stop (1 s at most: a
                    // fixed run waits for it, so nothing may wait on the caller).
                    let busy = NSCondition()
                    busy.lock()
                    _ = busy.wait(until: Date(timeIntervalSinceNow: 1))
                    busy.unlock()
                    exited.withLock { $0 = true }
                }
                while true { try yield(1) }
            }, consume: { (_: Int) in throw WriteFailed() })
        }
        #expect(exited.withLock { $0 }, "run returned while the producer was still running")
    }

    /// Ingests on threads of the test's own, whose producers wait until released.
    final class WaitingProducers: Sendable {
        let count: Int
        /// Whether released; the condition's lock guards it.
        private let released = Mutex(false)
        private let condition = NSCondition()
        private let started = Mutex((count: 0, waiter: CheckedContinuation<Void, Never>?.none))

        init(count: Int) { self.count = count }

        func release() {
            condition.lock()
            released.withLock { $0 = true }
            condition.broadcast()
            condition.unlock()
        }

        /// Returns once a producer has started.
        func firstStarted() async {
            await withCheckedContinuation { continuation in
                let now = started.withLock { state in
                    guard state.count == 0 else { return true }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        }

        /// Runs one ingest whose producer waits until released (a safety net
        /// of 90 s keeps a failing run from hanging) and yields whether it was.
        func ingest() async -> Bool {
            await withCheckedContinuation { continuation in
                Thread {
                    var batches: [Bool] = []
                    try? OverlappedIngest.run(produce: { yield in
                        self.didStart()
                        self.condition.lock()
                        let deadline = Date(timeIntervalSinceNow: 90)
                        while !self.released.withLock({ $0 }), self.condition.wait(until: deadline) {}
                        self.condition.unlock()
                        try yield(self.released.withLock { $0 })
                    }, consume: { batches.append($0) })
                    continuation.resume(returning: batches == [true])
                }.start()
            }
        }

        private func didStart() {
            let waiter = started.withLock { state -> CheckedContinuation<Void, Never>? in
                state.count += 1
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
