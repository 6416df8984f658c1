import Synchronization

/// A clock that moves only when a test tells it to, so time-based behaviour
/// (timeouts, grace periods, backoff, simulated links) runs instantly and the
/// same way every time.
///
/// ```swift
/// let clock = ManualClock()
/// let controller = NetworkController(configuration: .init(transport: transport, environment: .init(clock: clock)))
/// let task = Task { await controller.shutdown(grace: .seconds(5)) }
/// await clock.sleepers(atLeast: 1)   // shutdown is now waiting on the clock
/// clock.advance(by: .seconds(5))     // the grace period is over
/// ```
///
/// Unlike clocks that compare deadlines against `now` with `>=`, a sleep whose
/// deadline has been reached returns at once, so a sleeper that registers just
/// after an ``advance(by:)`` is never left behind.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock's time line.
    public struct Instant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
        /// The time since the clock was made.
        public var offset: Duration

        /// Makes an instant `offset` after the clock's start.
        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "t+\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Watcher {
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var next: UInt64 = 0
        var sleepers: [UInt64: Sleeper] = [:]
        var watchers: [UInt64: Watcher] = [:]
        /// Sleepers resumed by an advance whose task has not yet run again.
        var waking: Set<UInt64> = []
        /// ``advanceAndSettle(by:)`` calls waiting for `waking` to empty.
        var settling: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Makes a clock at `t+0`.
    public init() {}

    public var now: Instant { state.withLock { $0.now } }

    public var minimumResolution: Duration { .zero }

    /// The time since the clock was made.
    public var elapsed: Duration { now.offset }

    /// How many tasks are sleeping on the clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline any task is sleeping until, if one is sleeping.
    public var nextDeadline: Instant? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

    /// How many sleepers an advance has woken whose tasks have not run yet. A
    /// driver that wants the woken code to act before it moves time again waits
    /// for this to reach 0 (the woken task's own work after that is its business).
    public var pendingWakeups: Int { state.withLock { $0.waking.count } }

    /// Moves time to the earliest deadline a task sleeps until and wakes the tasks due then.
    /// Returns the new time, or `nil` (leaving time alone) when nobody sleeps.
    @discardableResult
    public func advanceToNextDeadline() -> Instant? {
        guard let deadline = nextDeadline else { return nil }
        advance(to: deadline)
        return deadline
    }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        defer {
            let settled = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                guard state.waking.remove(id) != nil, state.waking.isEmpty else { return [] }
                defer { state.settling = [] }
                return state.settling
            }
            for waiter in settled { waiter.resume() }
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (due, watchers) = state.withLock { state -> (Bool?, [CheckedContinuation<Void, Never>]) in
                    // Cancelled before registering: the cancellation handler found nothing to remove.
                    if Task.isCancelled { return (nil, []) }
                    if deadline <= state.now { return (true, []) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (false, Self.satisfiedWatchers(in: &state))
                }
                switch due {
                case nil: continuation.resume(throwing: CancellationError())
                case true?: continuation.resume()
                case false?: break
                }
                for watcher in watchers { watcher.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration` and wakes every sleeper whose deadline has
    /// been reached, earliest first.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Moves time forward by `duration`, wakes every sleeper due by then, and
    /// returns once each task it woke is running again: the code that waited
    /// for the time has taken its next step (its next sleep, say) when this
    /// returns, without the test yielding and hoping.
    ///
    /// For example:
    ///
    /// ```swift
    /// await clock.sleepers(atLeast: 1)              // the retry is waiting out its backoff
    /// await clock.advanceAndSettle(by: .seconds(1)) // and now it has been sent again
    /// ```
    public func advanceAndSettle(by duration: Duration) async {
        advance(by: duration)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let settled = state.withLock { state -> Bool in
                guard !state.waking.isEmpty else { return true }
                state.settling.append(continuation)
                return false
            }
            if settled { continuation.resume() }
        }
    }

    /// Moves time forward to `instant` (never backward) and wakes the sleepers due by then.
    public func advance(to instant: Instant) {
        let due = state.withLock { state -> [Sleeper] in
            if instant > state.now { state.now = instant }
            let due = state.sleepers.filter { $0.value.deadline <= state.now }.sorted { $0.value.deadline < $1.value.deadline }
            for (id, _) in due {
                state.sleepers[id] = nil
                state.waking.insert(id)
            }
            return due.map(\.value)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves time forward without waking anyone: a ``NetworkSimulator`` driver uses
    /// it to deliver the link's events at an instant before the clock's sleepers
    /// due at that same instant run. Call ``advance(to:)`` right after.
    func move(to instant: Instant) {
        state.withLock { state in
            if instant > state.now { state.now = instant }
        }
    }

    /// Returns once at least `count` tasks are sleeping on the clock: the way a
    /// test knows that the code under test is now waiting for time to pass.
    public func sleepers(atLeast count: Int) async {
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.watchers[id] = Watcher(count: count, continuation: continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private static func satisfiedWatchers(in state: inout State) -> [CheckedContinuation<Void, Never>] {
        let ready = state.watchers.filter { $0.value.count <= state.sleepers.count }
        for (id, _) in ready { state.watchers[id] = nil }
        return ready.map(\.value.continuation)
    }
}
