/// Puts one ticket's events in order before they are delivered.
///
/// The controller numbers a ticket's events under its lock, in the order they
/// happen, but delivers them after the lock is released, from whichever thread
/// made them: a ticket that joins a running job could otherwise see the job's
/// `finished` before its own `enqueued`. Each event passes through here, under
/// the ticket's lock:
/// - numbered events go out in their numbers' order, each exactly once;
/// - progress (numbered 0) goes out only after `enqueued` and never after the
///   terminal event; it is dropped once the ticket has ended;
/// - one thread delivers at a time, outside the lock: an event that arrives
///   while another is being delivered is queued, and the delivering thread
///   hands it on before it returns. So an observer may call back into the
///   controller (cancel the ticket, say) without deadlock.
///
/// A pure value: ``Ticket`` holds one under its lock.
struct EventOrder: Sendable {
    /// How many numbered events have been handed out for delivery.
    private(set) var delivered: UInt32 = 0
    /// Whether the terminal event has been handed out.
    private(set) var ended = false
    /// Whether some thread is delivering this ticket's events now.
    private var delivering = false
    /// Numbered events that came before their turn.
    private var early: [NetworkEvent] = []
    /// Progress that came while another event was being delivered, or before `enqueued`.
    private var progress: [NetworkEvent] = []

    /// Takes `event`; returns the event the caller must deliver now, if any.
    /// A caller that gets one is the deliverer: after delivering it, it calls
    /// ``next()`` until that returns `nil`.
    mutating func admit(_ event: NetworkEvent) -> NetworkEvent? {
        if event.sequence == 0 {
            guard !ended else { return nil }
            if delivering || delivered == 0 {
                progress.append(event)
                return nil
            }
            delivering = true
            return event
        }
        if !delivering, event.sequence == delivered &+ 1 {
            // The usual case: in turn, and nobody else delivering. No queue.
            delivering = true
            return take(event)
        }
        early.append(event)
        guard !delivering else { return nil }
        delivering = true
        return next()
    }

    /// The next event to deliver, or `nil` when there is none now (and the
    /// caller stops being the deliverer).
    mutating func next() -> NetworkEvent? {
        if let index = early.firstIndex(where: { $0.sequence == delivered &+ 1 }) {
            return take(early.remove(at: index))
        }
        if delivered > 0, !ended, !progress.isEmpty {
            return progress.removeFirst()
        }
        delivering = false
        return nil
    }

    private mutating func take(_ event: NetworkEvent) -> NetworkEvent {
        delivered = event.sequence
        if event.kind.isTerminal {
            ended = true
            progress.removeAll()
        }
        return event
    }
}
