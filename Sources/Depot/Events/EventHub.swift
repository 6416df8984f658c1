import Synchronization

/// Fans events out to any number of `AsyncStream` subscribers.
final class EventHub: Sendable {
    private struct State {
        var next: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<NetworkEvent>.Continuation] = [:]
        var finished = false
    }

    private let state = Mutex(State())
    /// Kept beside the lock so that emitting with no subscriber (the usual case)
    /// takes no lock: the controller emits several events per operation.
    private let subscriberCount = Atomic<Int>(0)
    private let bufferSize: Int

    init(bufferSize: Int) {
        self.bufferSize = bufferSize
    }

    var hasSubscribers: Bool { subscriberCount.load(ordering: .acquiring) > 0 }

    func subscribe() -> AsyncStream<NetworkEvent> {
        let (stream, continuation) = AsyncStream<NetworkEvent>.makeStream(bufferingPolicy: .bufferingNewest(bufferSize))
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            state.next += 1
            state.subscribers[state.next] = continuation
            subscriberCount.store(state.subscribers.count, ordering: .releasing)
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            state.withLock { state in
                state.subscribers[id] = nil
                subscriberCount.store(state.subscribers.count, ordering: .releasing)
            }
        }
        return stream
    }

    func emit(_ event: NetworkEvent) {
        guard hasSubscribers else { return }
        let targets = state.withLock { Array($0.subscribers.values) }
        for continuation in targets { continuation.yield(event) }
    }

    func finish() {
        let targets = state.withLock { state in
            state.finished = true
            defer {
                state.subscribers.removeAll()
                subscriberCount.store(0, ordering: .releasing)
            }
            return Array(state.subscribers.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
