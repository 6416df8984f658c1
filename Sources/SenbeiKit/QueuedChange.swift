import Depot
import DepotStore
import Foundation

/// A change the outbox holds: durable, shown in the cache at once, and sent
/// when it can be. ``SenbeiApp/outcome(of:within:)`` waits for its answer.
///
/// For example:
///
/// ```swift
/// let change = try await app.createTask(name: "Call Ann")   // stored; the list shows it now
/// switch try await app.outcome(of: change) {
/// case .sent(let task): print("created task #\(task.id)")
/// case .queued(let entry): print("queued as \(entry): will be sent when online")
/// }
/// ```
public struct QueuedChange<Record: Sendable>: Sendable {
    /// Its outbox entry, listed by ``DepotStore/Outbox/entries()`` until it is decided.
    public let entry: OutboxEntry.ID
    let watch: ChangeWatch
}

/// What became of a change while its caller waited.
///
/// Final on purpose: a change is either accepted or still queued; a refusal
/// is thrown.
public enum ChangeOutcome<Record: Sendable>: Sendable {
    /// The server accepted it: the record as the cache now holds it.
    case sent(Record)
    /// Durable, not accepted yet: it goes out when the server can be reached
    /// (on a later launch at the latest); the entry is its outbox entry.
    case queued(OutboxEntry.ID)

    /// The record, if the change was sent.
    public var sent: Record? {
        if case .sent(let record) = self { return record }
        return nil
    }
}

/// One queued change followed by this process, from the controller's events:
/// decided (the outbox committed, rolled back, discarded or failed it), stalled
/// (it waits for the network, backs off, or is held), or still on its way.
///
/// It follows events subscribed before the entry was queued or put back, so
/// no step is missed; it stops at the decision or when the controller shuts
/// down (then the change is left queued).
@MainActor
final class ChangeWatch {
    enum State {
        /// On its way: no answer yet.
        case waiting
        /// Not now: no network, a backoff, or a held lane.
        case stalled
        /// The outbox decided: the record, or why not.
        case decided(Result<any Sendable, DepotError>)
    }

    /// The outbox entry.
    let entry: OutboxEntry.ID
    /// The change's ``SenbeiMutation/localID``, when this process queued it.
    let localID: Int?
    private(set) var state = State.waiting
    private var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter = 0

    init(entry: OutboxEntry.ID, localID: Int?) {
        self.entry = entry
        self.localID = localID
    }

    var isDecided: Bool {
        if case .decided = state { return true }
        return false
    }

    /// Follows `changes` (subscribed before the entry moved) until the entry is
    /// decided; `resolve` turns the outbox's outcome into the change's, and
    /// posts what it means. The task runs to the decision even if nobody keeps
    /// the watch, so notifications are posted for changes nobody waits for.
    func follow(
        _ changes: OutboxChanges,
        outbox: Outbox,
        resolve: @escaping @MainActor (Result<NetworkResponse, DepotError>) async -> Result<any Sendable, DepotError>
    ) {
        let entry = entry
        Task { [weak self] in
            for await change in changes {
                guard let step = change.step else { continue }
                if change.entry == entry.rawValue {
                    if step.isFinal || step == .failed {
                        // Decided: the outbox kept the outcome before it said so.
                        let outcome = await outbox.outcome(of: entry)
                        let decided = await resolve(outcome)
                        self?.decide(decided)
                        return
                    }
                    // A conflict waits for the user, not the network: told at once.
                    if step == .willRetry || step == .held || step == .waitingForNetwork || step == .conflicted { self?.stall() }
                } else if step == .waitingForNetwork {
                    // Another change waits for the network: this one would too.
                    self?.stall()
                }
            }
            // The controller shut down: the change stays queued for a later launch.
            self?.stall()
        }
    }

    /// Returns once the change is decided or stalled, or after `grace`.
    func wait(within grace: Duration, clock: any Clock<Duration>) async -> State {
        guard case .waiting = state else { return state }
        nextWaiter += 1
        let key = nextWaiter
        let timer = Task { [weak self] in
            try? await clock.sleep(for: grace)
            self?.wake(key)
        }
        await withCheckedContinuation { waiters[key] = $0 }
        timer.cancel()
        return state
    }

    private func stall() {
        guard case .waiting = state else { return }
        state = .stalled
        wakeAll()
    }

    private func decide(_ outcome: Result<any Sendable, DepotError>) {
        state = .decided(outcome)
        wakeAll()
    }

    private func wake(_ key: Int) {
        waiters.removeValue(forKey: key)?.resume()
    }

    private func wakeAll() {
        let woken = waiters.values
        waiters.removeAll()
        for waiter in woken { waiter.resume() }
    }
}
