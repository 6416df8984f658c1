import Foundation

/// The single decision point at exit, and waiting for the queue to drain.
extension NetworkController {
    // MARK: - Shutdown

    /// The single decision point at exit.
    ///
    /// Cancels at once every operation whose exit policy is `.cancel`, lets
    /// `.finish` operations run for up to `grace`, then cancels what is left and
    /// releases the transport. Afterwards `enqueue` fails with ``DepotError/Code/shutDown``.
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
            state.report = ShutdownReport()
            return true
        }
        if first {
            change { $0.shutdown() }
            let timebase = self.timebase
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.waitUntilIdle() }
                group.addTask {
                    // A cancelled caller ends the grace period early.
                    try? await timebase.sleep(for: grace)
                }
                await group.next()
                group.cancelAll()
            }
            // Whichever wait ended first (a cancelled caller ends both), what is
            // left now is cancelled: nothing may stay queued after shutdown.
            let expired = state.withLock { state -> Bool in
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
