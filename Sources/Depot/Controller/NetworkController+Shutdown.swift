import Foundation
import Synchronization

/// The single decision point at exit, and waiting for the queue to drain.
extension NetworkController {
    // MARK: - Shutdown

    /// The single decision point at exit.
    ///
    /// Cancels at once every operation whose exit policy is `.cancel`, lets
    /// `.finish` operations run for up to `grace`, then cancels what is left and
    /// releases the transport. Afterwards `enqueue` fails with ``DepotError/Code/shutDown``.
    /// While offline, the probes go on through the grace: `.finish` work waiting
    /// for the network runs if it comes back in time.
    /// Cancelling the calling task ends the grace period early: what is left is
    /// cancelled, and the transport is released once it has ended.
    ///
    /// ```swift
    /// let report = await controller.shutdown(grace: .seconds(5))
    /// print(report)   // shutdown: 1 finished, 0 failed, 12 cancelled
    /// ```
    public func shutdown(grace: Duration) async -> ShutdownReport {
        let first = state.withLock { state -> Bool in
            guard !state.isShutDown else { return false }
            state.isShutDown = true
            state.graceOpen = true
            state.report = ShutdownReport()
            return true
        }
        if first {
            change { $0.shutdown() }
            await waitForGrace(grace)
            // Whichever wait ended first (a cancelled caller ends both), what is
            // left now is cancelled: nothing may stay queued after shutdown.
            let expired = state.withLock { state -> Bool in
                state.graceOpen = false
                guard !state.isIdle else { return false }
                state.report?.graceExpired = true
                return true
            }
            if expired { change { $0.cancelAll() } }
            // The cancelled jobs end before the transport goes, even for a
            // cancelled caller (a task of its own does not inherit the cancellation).
            await Task { await self.waitUntilIdle() }.value
        } else {
            await waitUntilIdle()
        }
        if first {
            state.withLock { $0.probeTask.take() }?.cancel()
            pipeline.watch.stop()
            await configuration.transport.shutdown()
            hub.finish()
        }
        return state.withLock { $0.report ?? ShutdownReport() }
    }

    /// Returns when the queue and every exit participant are done, when
    /// `grace` has passed, or when the calling task is cancelled, whichever
    /// comes first, without waiting for the others.
    private func waitForGrace(_ grace: Duration) async {
        struct Race {
            var continuation: CheckedContinuation<Void, Never>?
            var ended = false
        }
        let race = Mutex(Race())
        let end: @Sendable () -> Void = {
            race.withLock { race in
                race.ended = true
                return race.continuation.take()
            }?.resume()
        }
        let timebase = self.timebase
        let settled = Task { await self.waitUntilSettled(); end() }
        let timer = Task { try? await timebase.sleep(for: grace); end() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // An end that came first (or a cancelled caller) resumes at once.
                let ended = race.withLock { race in
                    if !race.ended { race.continuation = continuation }
                    return race.ended
                }
                if ended { continuation.resume() }
            }
        } onCancel: {
            end()
        }
        settled.cancel()
        timer.cancel()
    }

    /// Returns when nothing is queued or running and every exit participant
    /// (an outbox's delivery loops) has stopped, at the same time: a
    /// participant may queue more work (its next send) until it stops.
    private func waitUntilSettled() async {
        while !Task.isCancelled {
            await waitUntilIdle()
            let participants = state.withLock { Array($0.exitParticipants.values) }
            for participant in participants { await participant() }
            if state.withLock({ $0.isIdle }) { return }
        }
    }

    /// Registers work the grace of ``shutdown(grace:)`` also waits for:
    /// `waitUntilDone` returns once the participant queues nothing more.
    /// A participant sends with `perform(_:admittedDuringGrace: true)`.
    package func addExitParticipant(_ waitUntilDone: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            state.nextWaiter += 1
            state.exitParticipants[state.nextWaiter] = waitUntilDone
        }
    }

    /// Whether ``shutdown(grace:)`` has been called.
    public var isShutDown: Bool { state.withLock { $0.isShutDown } }

    /// Returns when nothing is queued, blocked or running, or when the calling task is cancelled.
    public func waitUntilIdle() async {
        let key = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if Task.isCancelled || state.isIdle { return true }
                    state.idleWaiters[key] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.idleWaiters.removeValue(forKey: key) }
            waiter?.resume()
        }
        // A cancellation that raced ahead of registration leaves nothing to clean up here:
        // the waiter is resumed either by the handler above or when the queue drains.
    }
}
