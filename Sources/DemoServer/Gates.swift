import Synchronization

/// Named gates that handlers wait at until a test opens them: how a test holds
/// a request on the server side for exactly as long as it needs.
///
/// A gate once opened stays open, so a request that arrives later passes at
/// once. When the server stops, every waiter fails, so no handler outlives it.
final class Gates: Sendable {
    private struct State {
        var open: Set<String> = []
        var waiting: [String: [UInt64: CheckedContinuation<Void, any Error>]] = [:]
        var next: UInt64 = 0
        var closed = false
    }

    /// A gate that no one can open: ``DemoServer/Fault/hang`` waits here.
    static let never = "\u{0}never"

    private let state = Mutex(State())

    /// Waits until `name` is opened; throws `CancellationError` if the task is
    /// cancelled or the server stops first.
    func wait(_ name: String) async throws {
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let passes: Bool? = state.withLock { state in
                    if state.closed || Task.isCancelled { return false }
                    if state.open.contains(name) { return true }
                    state.waiting[name, default: [:]][id] = continuation
                    return nil
                }
                switch passes {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                case nil: break
                }
            }
        } onCancel: {
            let continuation = state.withLock { $0.waiting[name]?.removeValue(forKey: id) }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Opens `name`: every waiter and every later arrival passes.
    func open(_ name: String) {
        guard name != Self.never else { return }
        let waiters = state.withLock { state in
            state.open.insert(name)
            return state.waiting.removeValue(forKey: name).map { Array($0.values) } ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Fails every waiter, now and later.
    func closeAll() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return state.waiting.values.flatMap(\.values)
        }
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
    }
}
