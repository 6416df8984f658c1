/// The scheduler's dependencies: a ticket blocked on others is admitted when
/// they all succeed, and fails with `dependencyFailed` as soon as one fails
/// or is cancelled.
extension Scheduler {
    /// A ticket resolved: release or fail the tickets that depend on it.
    mutating func settle(_ id: ID, outcome: Outcome) {
        guard let waiting = dependents.removeValue(forKey: id) else { return }
        for dependent in waiting where !cancelling.contains(dependent) {
            guard case .blocked(let entry, var remaining) = tickets[dependent] else { continue }
            if outcome == .succeeded {
                remaining.remove(id)
                if remaining.isEmpty {
                    tickets[dependent] = nil
                    admit(entry)
                } else {
                    tickets[dependent] = .blocked(entry, remaining: remaining)
                }
            } else {
                tickets[dependent] = nil
                for other in remaining where other != id { dependents[other]?.removeAll { $0 == dependent } }
                out.append(.dependencyFailed(dependent, cause: id))
                settle(dependent, outcome: .failed)
            }
        }
    }
}
