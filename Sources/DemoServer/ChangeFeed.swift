import Synchronization

/// A change a ``ChangeFeed`` can serve: as a server-sent event and as an entry
/// of a `/changes` page.
///
/// It exists so that ``EventStream`` and ``ChangeFeed/changesResponse(to:)``
/// serve every collection (Timeline's posts, the CRM's contacts and tasks) the
/// same way. The JSON it returns must be one line (no pretty printing): it goes
/// on an event's `data:` line as is.
protocol FeedChange: Sendable {
    /// The event's type, its `event:` line, and the entry's `"change"`: `post`, `delete`, `contact`, ….
    var event: String { get }
    /// The event's `data:` JSON, one line: the item as its list route encodes it, or `{"id":N}`.
    func data() throws -> String
    /// The members of the `/changes` entry besides `seq` and `change`, as JSON
    /// members without braces: `"post":{…}` or `"id":N`.
    func entryMembers() throws -> String
}

/// A collection and its ``ChangeLog`` under one lock, and the event streams
/// that wait for its changes.
///
/// Reading both under one lock is what lets `GET /timeline` say which change
/// its snapshot includes (`Change-Cursor`); writing both under one lock is
/// what keeps the numbers in the order the changes were made.
///
/// For example:
///
/// ```swift
/// let feed = ChangeFeed<[Int], Added>(model: [], capacity: 1_000)
/// feed.write { numbers, log in numbers.append(7); log.record(Added(7)) }
/// let (count, cursor) = feed.read { numbers, log in (numbers.count, log.sequence) }
/// ```
final class ChangeFeed<Model: Sendable, Change: FeedChange>: Sendable {
    private struct Guarded: Sendable {
        var model: Model
        var log: ChangeLog<Change>
    }

    private let guarded: Mutex<Guarded>
    private let listeners = Mutex<(next: UInt64, doorbells: [UInt64: Doorbell])>((0, [:]))

    /// Makes a feed of `model` at sequence 0 that keeps the last `capacity` changes.
    init(model: Model, capacity: Int) {
        guarded = Mutex(Guarded(model: model, log: ChangeLog(capacity: capacity)))
    }

    /// Reads the collection and its log together.
    func read<R: Sendable>(_ body: (Model, ChangeLog<Change>) -> R) -> R {
        guarded.withLock { body($0.model, $0.log) }
    }

    /// Changes the collection; `body` records each change it makes in the log.
    /// Open event streams are told once the lock is released.
    func write<R: Sendable>(_ body: (inout Model, inout ChangeLog<Change>) -> R) -> R {
        let (result, changed) = guarded.withLock { guarded -> (R, Bool) in
            let before = guarded.log.sequence
            let result = body(&guarded.model, &guarded.log)
            return (result, guarded.log.sequence != before)
        }
        if changed { ring(.changed) }
        return result
    }

    /// The log's latest number.
    var sequence: Int { guarded.withLock { $0.log.sequence } }

    /// The changes after `since` (see ``ChangeLog/changes(after:limit:)``).
    func changes(after since: Int, limit: Int) -> ChangeLog<Change>.Page? {
        guarded.withLock { $0.log.changes(after: since, limit: limit) }
    }

    /// Keeps the last `capacity` changes from now on.
    func resize(to capacity: Int) {
        guarded.withLock { $0.log.resize(to: capacity) }
    }

    // MARK: - Streams

    /// Registers a stream's doorbell; it rings on every change until ``unsubscribe(_:)``.
    func subscribe(_ doorbell: Doorbell) -> UInt64 {
        listeners.withLock { listeners in
            listeners.next += 1
            listeners.doorbells[listeners.next] = doorbell
            return listeners.next
        }
    }

    /// Stops ringing a stream's doorbell.
    func unsubscribe(_ token: UInt64) {
        _ = listeners.withLock { $0.doorbells.removeValue(forKey: token) }
    }

    /// How many streams are open on this feed.
    var streamCount: Int { listeners.withLock { $0.doorbells.count } }

    /// Rings every open stream's doorbell.
    func ring(_ signals: Doorbell.Signals) {
        let doorbells = listeners.withLock { Array($0.doorbells.values) }
        for doorbell in doorbells { doorbell.ring(signals) }
    }
}

/// How an ``EventStream`` learns that it has something to do: a set of pending
/// signals and at most one waiter, so a stream that is busy writing collects
/// any number of rings in constant memory.
final class Doorbell: Sendable {
    /// What happened since the stream last looked.
    struct Signals: OptionSet, Sendable {
        let rawValue: Int
        /// The feed has new changes.
        static let changed = Signals(rawValue: 1 << 0)
        /// A keep-alive is due.
        static let heartbeat = Signals(rawValue: 1 << 1)
        /// Close the connection now (`"cutStreams"`).
        static let cut = Signals(rawValue: 1 << 2)
        /// Send half of the next change event, then close (`"cutStreamsMidEvent"`).
        static let cutMidEvent = Signals(rawValue: 1 << 3)
        /// The server is stopping, or the stream's task was cancelled: end the response.
        static let stop = Signals(rawValue: 1 << 4)
    }

    private struct State {
        var pending: Signals = []
        var waiter: CheckedContinuation<Signals, Never>?
    }

    private let state = Mutex(State())
    /// Called when `cut` or `stop` rings while the stream is not waiting (it may
    /// be stuck writing to a client that does not read): closes the connection.
    private let interrupt: @Sendable () -> Void

    /// Makes a doorbell; `interrupt` closes the stream's connection.
    init(interrupt: @escaping @Sendable () -> Void) {
        self.interrupt = interrupt
    }

    /// Adds `signals` to the pending ones and wakes the waiter, if any.
    func ring(_ signals: Signals) {
        let (waiter, pending) = state.withLock { state -> (CheckedContinuation<Signals, Never>?, Signals) in
            state.pending.formUnion(signals)
            guard let waiter = state.waiter else { return (nil, state.pending) }
            state.waiter = nil
            defer { state.pending = [] }
            return (waiter, state.pending)
        }
        if let waiter {
            waiter.resume(returning: pending)
        } else if !signals.isDisjoint(with: [.cut, .stop]) {
            interrupt()
        }
    }

    /// Returns the pending signals, waiting for a ring if there are none. A
    /// cancelled task gets ``Signals/stop``.
    func wait() async -> Signals {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Signals, Never>) in
                let ready = state.withLock { state -> Signals? in
                    guard state.pending.isEmpty else {
                        defer { state.pending = [] }
                        return state.pending
                    }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            ring(.stop)
        }
    }
}
