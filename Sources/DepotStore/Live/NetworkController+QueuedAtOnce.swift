import Depot
import Synchronization

extension NetworkController {
    /// Runs `operation` like ``/Depot/NetworkController/perform(_:after:)``,
    /// but queued before the caller suspends: `perform` leaves the caller's
    /// actor before it queues, so a driver on the main actor would, for a
    /// moment, have neither queued work nor a sleep that anyone can see (a
    /// simulator deciding whether time may move). Cancelling the calling task
    /// cancels the ticket. `onEvent` sees the ticket's events in order, on the
    /// thread that delivers them.
    @MainActor
    func performQueuedAtOnce<Operation: NetworkOperation>(_ operation: Operation, parking: FeedParking? = nil, onEvent: (@Sendable (NetworkEvent) -> Void)? = nil) async throws(DepotError) -> Operation.Output {
        let holder = Mutex<(ticket: Ticket?, cancelled: Bool)>((nil, false))
        let result: Result<Operation.Output, DepotError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resume: @MainActor @Sendable (Result<Operation.Output, DepotError>) -> Void = { continuation.resume(returning: $0) }
                let ticket = onEvent.map { enqueue(operation, onEvent: $0, completion: resume) } ?? enqueue(operation, completion: resume)
                parking?.ticket = ticket
                let cancelled = holder.withLock { state in
                    state.ticket = ticket
                    return state.cancelled
                }
                if cancelled || Task.isCancelled { ticket.cancel() }
            }
        } onCancel: {
            let ticket = holder.withLock { state in
                state.cancelled = true
                return state.ticket
            }
            ticket?.cancel()
        }
        parking?.ticket = nil
        return try result.get()
    }
}

/// What a feed's driver waits on, so that a test driving simulated time
/// knows when it may move (``LiveFeed``'s `isParked`). Read from any thread.
final class FeedParking: Sendable {
    private struct State {
        var running = false
        var ticket: Ticket?
        var sleeping = false
        var woken = false
        var reports = 0
    }

    private let state = Mutex(State())

    /// The ticket the driver awaits: until it finishes, the controller shows the work.
    var ticket: Ticket? {
        get { state.withLock { $0.ticket } }
        set { state.withLock { $0.ticket = newValue } }
    }

    /// The driver sleeps on the clock.
    var sleeping: Bool {
        get { state.withLock { $0.sleeping } }
        set { state.withLock { $0.sleeping = newValue } }
    }

    /// A sleep of the driver or its linger ended, and the main actor has not
    /// acted on it yet.
    var woken: Bool {
        get { state.withLock { $0.woken } }
        set { state.withLock { $0.woken = newValue } }
    }

    /// The driver's loop runs.
    var running: Bool {
        get { state.withLock { $0.running } }
        set { state.withLock { $0.running = newValue } }
    }

    /// The stream or the controller reported something the main actor has not
    /// handled yet (``reported()`` before the report is sent).
    func reported() {
        state.withLock { $0.reports += 1 }
    }

    /// The main actor handled a report, or it was never sent.
    func handled() {
        state.withLock { $0.reports -= 1 }
    }

    /// Whether the driver waits on the controller or the clock (or does not
    /// run), and the feed has handled every report: its status is up to date.
    var isParked: Bool {
        state.withLock { state in
            if state.woken || state.reports > 0 { return false }
            guard state.running else { return true }
            if let ticket = state.ticket { return !ticket.isFinished }
            return state.sleeping
        }
    }
}
