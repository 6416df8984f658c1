import Synchronization

/// Watches the timeouts of every running transfer with one sleeping task per
/// controller, instead of one timer task per transfer.
///
/// Each transfer registers its idle and total limits and touches its entry when
/// bytes arrive (an atomic store). The watch sleeps on the injected clock
/// until the earliest deadline, then fires the transfers that are really due and
/// sleeps again. Because touching only pushes deadlines later, a new transfer
/// re-arms the sleeper only when its deadline is earlier than the armed one.
final class DeadlineWatch: Sendable {
    /// One watched transfer. Touching it is an atomic store, not a lock: bytes
    /// arrive often, on many transfers at once.
    final class Key: Sendable {
        fileprivate let id: UInt64
        /// Nanoseconds on the timebase.
        private let lastActivity: Atomic<Int64>
        fileprivate let idle: Duration
        fileprivate let total: Duration?
        fileprivate let totalDeadline: Duration?
        fileprivate let onExpire: @Sendable () -> Void
        /// How the transfer ended: the watch fired (with why), or the transfer
        /// finished first. Whichever comes first wins; the other is a no-op.
        private let ending = Mutex<Ending?>(nil)

        private enum Ending {
            case expired(DepotError)
            case finished
        }

        fileprivate init(id: UInt64, now: Duration, timeout: Timeout, onExpire: @escaping @Sendable () -> Void) {
            self.id = id
            self.lastActivity = Atomic(Self.nanoseconds(now))
            self.idle = timeout.idle
            self.total = timeout.total
            self.totalDeadline = timeout.total.map { now + $0 }
            self.onExpire = onExpire
        }

        /// The timeout that fired for this transfer, if one did.
        var expiry: DepotError? {
            ending.withLock { ending in
                if case .expired(let error) = ending { return error }
                return nil
            }
        }

        /// The transfer is complete: a timeout firing from now on changes
        /// nothing. Returns `false` if the timeout fired first (the transfer
        /// must then be reported as timed out: its task is being cancelled).
        func finish() -> Bool {
            ending.withLock { ending in
                if case .expired = ending { return false }
                ending = .finished
                return true
            }
        }

        fileprivate func expire(_ error: DepotError) {
            let fires = ending.withLock { ending in
                guard case .none = ending else { return false }
                ending = .expired(error)
                return true
            }
            if fires { onExpire() }
        }

        fileprivate func touch(at now: Duration) {
            lastActivity.store(Self.nanoseconds(now), ordering: .relaxed)
        }

        /// Far enough ahead that the idle deadline never comes, and far from overflowing.
        fileprivate static let paused = Int64.max / 4

        fileprivate var deadline: Duration {
            let idleDeadline = Duration.nanoseconds(lastActivity.load(ordering: .relaxed)) + idle
            return totalDeadline.map { min($0, idleDeadline) } ?? idleDeadline
        }

        fileprivate func expiry(at now: Duration) -> DepotError? {
            if let totalDeadline, let total, now >= totalDeadline {
                return DepotError(.timedOut, detail: "\(total) in total")
            }
            if now >= Duration.nanoseconds(lastActivity.load(ordering: .relaxed)) + idle {
                return DepotError(.timedOut, detail: "\(idle) without a byte")
            }
            return nil
        }

        private static func nanoseconds(_ duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            return seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000
        }
    }

    private struct State {
        var next: UInt64 = 0
        var entries: [UInt64: Key] = [:]
        var armed: Duration?
        var sleeper: Task<Void, Never>?
        var generation: UInt64 = 0
    }

    private let timebase: Timebase
    private let state = Mutex(State())

    init(timebase: Timebase) {
        self.timebase = timebase
    }

    /// Starts watching a transfer. `onExpire` is called at most once, outside any
    /// lock, after the key's ``Key/expiry`` is set.
    func register(timeout: Timeout, onExpire: @escaping @Sendable () -> Void) -> Key {
        let now = timebase.now()
        let (key, rearm) = state.withLock { state -> (Key, Task<Void, Never>?) in
            state.next += 1
            let key = Key(id: state.next, now: now, timeout: timeout, onExpire: onExpire)
            state.entries[key.id] = key
            return (key, rearmIfNeeded(for: key.deadline, in: &state))
        }
        rearm?.cancel()
        return key
    }

    /// Bytes arrived: the idle deadline moves (to `time` after `now`, if given).
    func touch(_ key: Key, at time: Duration? = nil) {
        key.touch(at: time ?? timebase.now())
    }

    /// Stops the idle deadline while the transfer waits for its consumer, not
    /// for the network (a body sink that is writing); the total one still runs.
    /// ``resume(_:)`` starts it again from that moment.
    func pause(_ key: Key) {
        key.touch(at: .nanoseconds(Key.paused))
    }

    /// Starts the idle deadline again after ``pause(_:)``, from now. The sleeper
    /// may have been armed past it (or not at all) meanwhile: it is re-armed.
    func resume(_ key: Key) {
        key.touch(at: timebase.now())
        let replaced = state.withLock { state -> Task<Void, Never>? in
            guard state.entries[key.id] != nil else { return nil }
            return rearmIfNeeded(for: key.deadline, in: &state)
        }
        replaced?.cancel()
    }

    /// Stops watching a transfer.
    func remove(_ key: Key) {
        state.withLock { _ = $0.entries.removeValue(forKey: key.id) }
    }

    /// Stops the sleeper; the watch can still be used and re-arms on the next register.
    func stop() {
        let sleeper = state.withLock { state -> Task<Void, Never>? in
            defer { state.sleeper = nil; state.armed = nil }
            return state.sleeper
        }
        sleeper?.cancel()
    }

    /// Arms a sleeper for `deadline` when none is armed for an earlier one.
    /// Returns the sleeper it replaces, to cancel outside the lock.
    private func rearmIfNeeded(for deadline: Duration, in state: inout State) -> Task<Void, Never>? {
        if let armed = state.armed, armed <= deadline { return nil }
        let replaced = state.sleeper
        state.armed = deadline
        state.generation += 1
        let generation = state.generation
        let timebase = self.timebase
        state.sleeper = Task { [weak self] in
            do { try await timebase.sleepUntil(deadline) } catch { return }
            self?.fire(generation: generation)
        }
        return replaced
    }

    private func fire(generation: UInt64) {
        let now = timebase.now()
        let (expired, replaced) = state.withLock { state -> ([(Key, DepotError)], Task<Void, Never>?) in
            guard state.generation == generation else { return ([], nil) }
            state.armed = nil
            state.sleeper = nil
            var expired: [(Key, DepotError)] = []
            for (id, entry) in state.entries {
                if let error = entry.expiry(at: now) {
                    expired.append((entry, error))
                    state.entries[id] = nil
                }
            }
            var replaced: Task<Void, Never>?
            if let earliest = state.entries.values.map(\.deadline).min() {
                replaced = rearmIfNeeded(for: earliest, in: &state)
            }
            return (expired, replaced)
        }
        replaced?.cancel()
        for (entry, error) in expired { entry.expire(error) }
    }
}
