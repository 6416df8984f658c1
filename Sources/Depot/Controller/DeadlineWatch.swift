import Synchronization

/// Watches the timeouts of every running transfer with one sleeping task per
/// controller, instead of one timer task per transfer.
///
/// Each transfer registers its idle and total limits and touches its entry when
/// bytes arrive (a lock and a store). The watch sleeps on the injected clock
/// until the earliest deadline, then fires the transfers that are really due and
/// sleeps again. Because touching only pushes deadlines later, a new transfer
/// re-arms the sleeper only when its deadline is earlier than the armed one.
final class DeadlineWatch: Sendable {
    typealias Key = UInt64

    private struct Entry {
        var lastActivity: Duration
        var idle: Duration
        var total: Duration?
        var totalDeadline: Duration?
        var onExpire: @Sendable (DepotError) -> Void

        var deadline: Duration {
            let idleDeadline = lastActivity + idle
            return totalDeadline.map { min($0, idleDeadline) } ?? idleDeadline
        }

        func expiry(at now: Duration) -> DepotError? {
            if let totalDeadline, let total, now >= totalDeadline {
                return DepotError(.timedOut, detail: "\(total) in total")
            }
            if now >= lastActivity + idle {
                return DepotError(.timedOut, detail: "\(idle) without a byte")
            }
            return nil
        }
    }

    private struct State {
        var next: Key = 0
        var entries: [Key: Entry] = [:]
        var armed: Duration?
        var sleeper: Task<Void, Never>?
        var generation: UInt64 = 0
    }

    private let timebase: Timebase
    private let state = Mutex(State())

    init(timebase: Timebase) {
        self.timebase = timebase
    }

    /// Starts watching a transfer. `onExpire` is called at most once, outside any lock.
    func register(timeout: Timeout, onExpire: @escaping @Sendable (DepotError) -> Void) -> Key {
        let now = timebase.now()
        let entry = Entry(lastActivity: now, idle: timeout.idle, total: timeout.total, totalDeadline: timeout.total.map { now + $0 }, onExpire: onExpire)
        let (key, rearm) = state.withLock { state -> (Key, Task<Void, Never>?) in
            state.next += 1
            state.entries[state.next] = entry
            return (state.next, rearmIfNeeded(for: entry.deadline, in: &state))
        }
        rearm?.cancel()
        return key
    }

    /// Bytes arrived: the idle deadline moves.
    func touch(_ key: Key) {
        let now = timebase.now()
        state.withLock { $0.entries[key]?.lastActivity = now }
    }

    /// Stops watching a transfer.
    func remove(_ key: Key) {
        state.withLock { _ = $0.entries.removeValue(forKey: key) }
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
        let (expired, replaced) = state.withLock { state -> ([(Entry, DepotError)], Task<Void, Never>?) in
            guard state.generation == generation else { return ([], nil) }
            state.armed = nil
            state.sleeper = nil
            var expired: [(Entry, DepotError)] = []
            for (key, entry) in state.entries {
                if let error = entry.expiry(at: now) {
                    expired.append((entry, error))
                    state.entries[key] = nil
                }
            }
            var replaced: Task<Void, Never>?
            if let earliest = state.entries.values.map(\.deadline).min() {
                replaced = rearmIfNeeded(for: earliest, in: &state)
            }
            return (expired, replaced)
        }
        replaced?.cancel()
        for (entry, error) in expired { entry.onExpire(error) }
    }
}
