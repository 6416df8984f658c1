/// Work whose caller follows its ticket's events in order, on the thread
/// that delivers them: a caller that must put them in one sequence with what
/// it hears from the operation itself (a live feed's stream says it opened,
/// the controller says it waits for the network), which two subscriptions,
/// each read by its own task, cannot promise.
extension NetworkController {
    /// ``enqueue(_:after:completion:)`` whose `onEvent` sees the ticket's
    /// events in order, before subscribers do.
    ///
    /// For example (a live feed's stream):
    ///
    /// ```swift
    /// let ticket = controller.enqueue(stream, onEvent: { event in reports.yield(.event(event.kind)) }) { result in ... }
    /// ```
    ///
    /// - Parameters:
    ///   - operation: What to do.
    ///   - onEvent: Called with each of the ticket's events, in their order,
    ///     from whichever thread delivers them: it must return quickly and
    ///     must not wait on the main actor.
    ///   - completion: Called once with the output or the error, on the main actor.
    /// - Returns: The ticket.
    @discardableResult
    package func enqueue<Operation: NetworkOperation>(
        _ operation: Operation,
        onEvent: @escaping @Sendable (NetworkEvent) -> Void,
        completion: @escaping @MainActor @Sendable (Swift.Result<Operation.Output, DepotError>) -> Void
    ) -> Ticket {
        submit(operation, ticket: makeTicket(for: operation, tap: onEvent), after: []) { _ in
            { result in
                let typed = Self.typed(result, as: Operation.Output.self, operation: operation.name)
                Task { @MainActor in completion(typed) }
            }
        }
    }
}
