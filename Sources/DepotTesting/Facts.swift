import Dispatch
import Observation
import Synchronization

// Waiting on facts where a sequence is not at hand. Each wait fails after a
// real-time guard (through ``Recorder``) instead of hanging; none measures
// time, and none yields and hopes.

/// Returns once `condition`, read from `@Observable` objects on the main
/// actor, holds: it is checked now and again after each change of what it read.
///
/// For example:
///
/// ```swift
/// let status = OutboxStatus(outbox: outbox)
/// try await observed { status.isWaitingForNetwork }
/// ```
///
/// - Parameters:
///   - timeout: How long to wait, in real time, before failing (30 s).
///   - condition: What must hold; it must read observable properties, or
///     nothing tells it to look again.
/// - Throws: ``Recorder/Failure`` when the time runs out first.
@MainActor
public func observed(timeout: Duration = .seconds(30), until condition: @escaping @MainActor () -> Bool) async throws(Recorder<Void>.Failure) {
    let (changes, changed) = AsyncStream.makeStream(of: Void.self)
    let recorder = Recorder(changes, timeout: timeout)
    defer { changed.finish() }
    while !withObservationTracking({ condition() }, onChange: { changed.yield() }) {
        try await recorder.next()
    }
}

/// Awaits `work`, failing after `timeout` of real time (30 s) if it has not
/// returned: for a fact that is an async call returning (a lane stopping,
/// say) whose failure would otherwise hang the test.
///
/// For example:
///
/// ```swift
/// _ = await controller.shutdown(grace: .zero)
/// try await completes { await outbox.waitUntilIdle() }
/// ```
///
/// - Throws: ``Recorder/Failure`` when the time runs out first.
public func completes(within timeout: Duration = .seconds(30), _ work: @escaping @Sendable () async -> Void) async throws(Recorder<Void>.Failure) {
    let (done, finished) = AsyncStream.makeStream(of: Void.self)
    let recorder = Recorder(done, timeout: timeout)
    Task {
        await work()
        finished.yield()
        finished.finish()
    }
    try await recorder.next()
}

/// A serial executor for the tasks a test starts, which says when all of them
/// are suspended: the way a test knows that a task has reached its first real
/// `await` (registered as a waiter, parked on a simulated link) without
/// polling the state the code under test keeps to itself.
///
/// For example:
///
/// ```swift
/// let executor = SuspensionExecutor()
/// let task = Task(executorPreference: executor) { try await fetch(simulator, "/a") }
/// await executor.suspended()   // the transfer is open and waits on the link
/// ```
///
/// A task started with it runs its nonisolated code, and that of its child
/// tasks, on this executor; unstructured tasks it starts do not.
public final class SuspensionExecutor: TaskExecutor {
    private struct State {
        /// Jobs enqueued and not yet run to their next suspension.
        var pending = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let queue = DispatchQueue(label: "SuspensionExecutor")
    private let state = Mutex(State())

    /// Makes an executor with nothing queued.
    public init() {}

    /// Runs `job` on the executor's serial queue.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        state.withLock { $0.pending += 1 }
        queue.async {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
            let idle = self.state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.pending -= 1
                guard state.pending == 0 else { return [] }
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in idle { waiter.resume() }
        }
    }

    /// Returns once no job of this executor is queued or running: every task
    /// on it waits at an `await` (or has ended).
    public func suspended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if state.pending == 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}
