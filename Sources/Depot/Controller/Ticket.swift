import Synchronization

/// How far a transfer has come.
public struct TransferProgress: Sendable, Hashable, CustomStringConvertible {
    /// Body bytes received so far.
    public var received: Int64
    /// Body bytes expected (from Content-Length), when known.
    public var expected: Int64?

    /// Makes a progress value.
    public init(received: Int64 = 0, expected: Int64? = nil) {
        self.received = received
        self.expected = expected
    }

    /// `received / expected`, when the size is known.
    public var fraction: Double? {
        guard let expected, expected > 0 else { return nil }
        return min(1, Double(received) / Double(expected))
    }

    public var description: String {
        if let expected { return "\(received)/\(expected) bytes" }
        return "\(received) bytes"
    }
}

/// A handle on one enqueued operation: cancel it, watch its progress, and
/// compare it with "the current one".
///
/// ```swift
/// currentSearch?.cancel()
/// currentSearch = controller.enqueue(SearchContacts(query: text)) { [weak self] ticket, result in
///     guard let self, ticket == self.currentSearch else { return }  // a stale answer
///     self.show(result)
/// }
/// ```
///
/// Tickets are compared by identity: two tickets are equal only if they are the
/// same enqueue call.
public final class Ticket: Hashable, Sendable, CustomStringConvertible {
    /// A ticket's identity, unique within a process.
    public struct ID: Hashable, Sendable, Comparable, CustomStringConvertible {
        /// The number, increasing in enqueue order.
        public let rawValue: UInt64
        /// Makes an id; Depot makes them for you.
        public init(rawValue: UInt64) { self.rawValue = rawValue }
        public static func < (lhs: ID, rhs: ID) -> Bool { lhs.rawValue < rhs.rawValue }
        public var description: String { "#\(rawValue)" }
    }

    struct State: Sendable {
        var progress = TransferProgress()
        var outcome: Scheduler.Outcome?
        var failure: DepotError?
        var events = EventOrder()
    }

    /// This ticket's identity.
    public let id: ID
    /// The name of the operation it stands for.
    public let operationName: String
    let state: Mutex<State>
    /// The last number given to one of this ticket's events. Taken under the
    /// controller's lock, so the numbers follow the order things happened in.
    private let eventCount = Atomic<UInt32>(0)
    /// Weak: a ticket kept after its controller is gone cancels nothing.
    /// (A reference, not a closure: one allocation less per operation.)
    private weak let controller: NetworkController?
    /// Sees this ticket's events, in order, before subscribers do (an outbox
    /// follows its delivery's waits this way).
    private let tap: (@Sendable (NetworkEvent) -> Void)?

    init(id: ID, operationName: String, controller: NetworkController?, tap: (@Sendable (NetworkEvent) -> Void)? = nil) {
        self.id = id
        self.operationName = operationName
        self.state = Mutex(State())
        self.controller = controller
        self.tap = tap
    }

    /// Cancels the operation. Its completion is called with `.cancelled` unless it
    /// already finished. If other tickets share the same transfer, the transfer
    /// goes on for them.
    public func cancel() {
        controller?.cancel(id)
    }

    /// Bytes received and expected so far.
    public var progress: TransferProgress {
        state.withLock { $0.progress }
    }

    /// Whether the outcome is decided. The completion may still be on its way to the main actor.
    public var isFinished: Bool {
        state.withLock { $0.outcome != nil }
    }

    var outcome: Scheduler.Outcome? { state.withLock { $0.outcome } }

    func resolve(_ outcome: Scheduler.Outcome, failure: DepotError?) {
        state.withLock {
            $0.outcome = outcome
            $0.failure = failure
        }
    }

    /// Records progress unless the outcome is decided; returns whether it did.
    func updateProgressIfOpen(_ progress: TransferProgress) -> Bool {
        state.withLock { state in
            guard state.outcome == nil else { return false }
            state.progress = progress
            return true
        }
    }

    /// The next number for one of this ticket's events.
    func numberEvent() -> UInt32 {
        eventCount.wrappingAdd(1, ordering: .relaxed).newValue
    }

    /// Hands this ticket's events to `deliver` in their numbers' order (see
    /// ``EventOrder``): `event` now, later, or by another thread.
    func deliverInOrder(_ event: NetworkEvent, _ deliver: (NetworkEvent) -> Void) {
        var next = state.withLock { $0.events.admit(event) }
        while let current = next {
            tap?(current)
            deliver(current)
            next = state.withLock { $0.events.next() }
        }
    }

    public static func == (lhs: Ticket, rhs: Ticket) -> Bool { lhs.id == rhs.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
    public var description: String { "Ticket(\(id) \(operationName))" }
}

/// A started job's own state: its task and the tickets it reports progress to
/// (those waiting when it started, and those that join it while it runs). Kept
/// with the job, so that launching it and each chunk take this small lock and
/// not the controller's.
final class RunningJob: Sendable {
    private struct State {
        /// Most jobs have one ticket, which needs no array (one allocation per job).
        var first: Ticket?
        var others: [Ticket] = []
        var task: Task<Void, Never>?
        var cancelled = false
        var ended = false
    }

    private let state = Mutex(State())

    func add(_ ticket: Ticket) {
        state.withLock { state in
            if state.first == nil { state.first = ticket } else { state.others.append(ticket) }
        }
    }

    /// The job's tickets, in the order they were added.
    var tickets: Tickets { state.withLock { Tickets(first: $0.first, others: $0.others) } }

    /// The tickets of a job, read without building an array.
    struct Tickets: Sequence {
        let first: Ticket?
        let others: [Ticket]

        func makeIterator() -> Iterator { Iterator(first: first, others: others.makeIterator()) }

        struct Iterator: IteratorProtocol {
            var first: Ticket?
            var others: IndexingIterator<[Ticket]>

            mutating func next() -> Ticket? {
                if let ticket = first {
                    first = nil
                    return ticket
                }
                return others.next()
            }
        }
    }

    /// Keeps the job's task for cancelling. Returns `false` when the job was
    /// cancelled before its task existed: the caller cancels the task.
    func store(_ task: Task<Void, Never>) -> Bool {
        state.withLock { state in
            if state.cancelled { return false }
            if !state.ended { state.task = task }
            return true
        }
    }

    /// Cancels the job's task now, or as soon as it is stored.
    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }

    /// The job ended: drop the task (the task's closure refers to this object).
    func end() {
        state.withLock { state in
            state.ended = true
            state.task = nil
        }
    }
}
