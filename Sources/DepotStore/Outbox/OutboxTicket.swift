import Depot

/// A queued mutation, as ``Outbox/send(_:)`` returns it once it is durable:
/// await its answer, cancel it before it is sent, or follow its steps.
///
/// ```swift
/// let ticket = try await outbox.send(SendPost(payload: .init(localID: "local-1", text: "hi")))
/// switch await ticket.outcome() {
/// case .success(let response): print("sent:", response.status)
/// case .failure(let error): print("not sent:", error)
/// }
/// ```
///
/// The ticket lives only in this process. The mutation does not: after a
/// relaunch, find it in ``Outbox/entries()`` and follow it by its ``id``.
public struct OutboxTicket: Sendable, Identifiable, Hashable {
    /// The entry's id.
    public let id: OutboxEntry.ID
    let outbox: Outbox

    /// Waits until the entry is decided: the server's answer once committed,
    /// or the error it was rolled back or discarded with. See ``Outbox/outcome(of:)``.
    public func outcome() async -> Result<NetworkResponse, DepotError> {
        await outbox.outcome(of: id)
    }

    /// Removes the entry and rolls its optimistic change back, if it is not
    /// being sent; see ``Outbox/discard(_:)``.
    ///
    /// - Throws: `.invalidRequest` once an attempt is under way (the server's
    ///   answer decides it then) or after it was decided.
    public func cancel() async throws(DepotError) {
        try await outbox.discard(id)
    }

    /// The entry's steps from now on (sending, will retry, committed, ...),
    /// each with the outbox's counts after it. The sequence ends after a
    /// final step (``OutboxChange/Step/isFinal``), at once if
    /// the entry was already decided, or when the controller has shut down.
    public func changes() -> OutboxChanges {
        let changes = outbox.changes()
        let key = id.rawValue
        let outbox = outbox
        return DepotStream(AsyncStream { continuation in
            let task = Task {
                // Subscribed above, before this look: a step taken after the
                // look arrives as an event, one taken before is in the outcomes.
                if let decided = outbox.state.withLock({ $0.outcomes[key]?.step }), decided.isFinal {
                    let counts = try? await outbox.snapshot()
                    continuation.yield(OutboxChange(
                        entry: key, step: decided,
                        pending: counts?.pendingCount ?? 0, failed: counts?.failed.count ?? 0, isSending: counts?.isSending ?? false))
                    continuation.finish()
                    return
                }
                for await change in changes {
                    guard change.entry == key else { continue }
                    continuation.yield(change)
                    if change.step?.isFinal == true { break }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        })
    }

    public static func == (lhs: OutboxTicket, rhs: OutboxTicket) -> Bool {
        lhs.id == rhs.id && lhs.outbox === rhs.outbox
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
    }
}
