@testable import Depot
import DepotTesting
import Foundation
import Synchronization
import Testing

/// The deadline watch on a manual clock: one sleeper for every transfer,
/// idle and total limits, and the race between a timeout and a finished transfer.
@Suite(.timeLimit(.minutes(1))) struct DeadlineWatchTests {
    /// Records which keys expired, and lets a test wait for a number of them.
    final class Expiries: Sendable {
        private let fired = Mutex<[String]>([])
        private let stream: AsyncStream<String>
        private let continuation: AsyncStream<String>.Continuation

        init() {
            (stream, continuation) = AsyncStream.makeStream()
        }

        func onExpire(_ name: String) -> @Sendable () -> Void {
            { [self] in
                fired.withLock { $0.append(name) }
                continuation.yield(name)
            }
        }

        var names: [String] { fired.withLock { $0 } }

        /// Waits until `name` has fired.
        func wait(for name: String) async {
            for await fired in stream where fired == name { return }
        }
    }

    @Test func anIdleTransferExpiresOnceWithItsReason() async throws {
        let clock = ManualClock()
        let watch = DeadlineWatch(timebase: Timebase(clock))
        let expiries = Expiries()
        let key = watch.register(timeout: .idle(.seconds(2)), onExpire: expiries.onExpire("a"))
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(2))
        await expiries.wait(for: "a")
        #expect(expiries.names == ["a"])
        #expect(key.expiry?.code == .timedOut)
        #expect("\(key.expiry.map { "\($0)" } ?? "")".contains("without a byte"))
        // Too late to finish: the transfer is reported as timed out.
        #expect(!key.finish())
    }

    @Test func aPausedTransferHasNoIdleDeadlineUntilItResumes() async throws {
        let clock = ManualClock()
        let watch = DeadlineWatch(timebase: Timebase(clock))
        let expiries = Expiries()
        let key = watch.register(timeout: .idle(.seconds(2)), onExpire: expiries.onExpire("paused"))
        // (a transfer with a distant deadline keeps the watch sleeping, whatever the other does)
        let distant = watch.register(timeout: .idle(.seconds(100)), onExpire: expiries.onExpire("distant"))
        defer { watch.remove(distant) }
        // Given a transfer waiting for its consumer (a streamed body's sink), not for the network
        watch.pause(key)
        await clock.sleepers(atLeast: 1)

        // When far more than its idle limit goes by
        clock.advance(by: .seconds(10))
        await clock.sleepers(atLeast: 1)  // the watch woke, found nothing due, and sleeps again

        // Then it has not timed out
        #expect(expiries.names.isEmpty)
        #expect(key.expiry == nil)

        // And once resumed, its idle limit counts from then
        watch.resume(key)
        clock.advance(by: .seconds(1.5))
        #expect(expiries.names.isEmpty)
        clock.advance(by: .seconds(0.5))
        await expiries.wait(for: "paused")
        #expect(key.expiry?.code == .timedOut)
    }

    @Test func bytesPushTheIdleDeadlineButNotTheTotalOne() async throws {
        let clock = ManualClock()
        let watch = DeadlineWatch(timebase: Timebase(clock))
        let expiries = Expiries()
        let idle = watch.register(timeout: .idle(.seconds(2)), onExpire: expiries.onExpire("idle"))
        let total = watch.register(timeout: Timeout(idle: .seconds(2), total: .seconds(3)), onExpire: expiries.onExpire("total"))
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1.5))
        watch.touch(idle)
        watch.touch(total)
        clock.advance(by: .seconds(1.5))  // t = 3: the total deadline
        await expiries.wait(for: "total")
        #expect(expiries.names == ["total"])
        #expect("\(total.expiry.map { "\($0)" } ?? "")".contains("in total"))
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(0.5))  // t = 3.5: 2 s after the last byte
        await expiries.wait(for: "idle")
        #expect(expiries.names == ["total", "idle"])
    }

    /// A transfer that finished is never expired, even when the watch fires
    /// for it in the same pass as another, due transfer.
    @Test func aFinishedTransferIsNeverExpired() async throws {
        let clock = ManualClock()
        let watch = DeadlineWatch(timebase: Timebase(clock))
        let expiries = Expiries()
        let finished = watch.register(timeout: .idle(.seconds(1)), onExpire: expiries.onExpire("finished"))
        let due = watch.register(timeout: .idle(.seconds(1)), onExpire: expiries.onExpire("due"))
        #expect(finished.finish())
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        await expiries.wait(for: "due")
        #expect(expiries.names == ["due"])
        #expect(finished.expiry == nil)
        #expect(due.expiry != nil)
    }

    @Test func aRemovedTransferIsNotWatched() async throws {
        let clock = ManualClock()
        let watch = DeadlineWatch(timebase: Timebase(clock))
        let expiries = Expiries()
        let removed = watch.register(timeout: .idle(.seconds(1)), onExpire: expiries.onExpire("removed"))
        _ = watch.register(timeout: .idle(.seconds(1)), onExpire: expiries.onExpire("kept"))
        watch.remove(removed)
        await clock.sleepers(atLeast: 1)
        clock.advance(by: .seconds(1))
        await expiries.wait(for: "kept")
        #expect(expiries.names == ["kept"])
    }
}
