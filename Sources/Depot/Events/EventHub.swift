import Synchronization

/// Fans events out to any number of `AsyncStream` subscribers.
final class EventHub: Sendable {
    private struct State {
        var next: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<NetworkEvent>.Continuation] = [:]
        var finished = false
    }

    private let state = Mutex(State())
    private let bufferSize: Int

    init(bufferSize: Int) {
        self.bufferSize = bufferSize
    }

    var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    func subscribe() -> AsyncStream<NetworkEvent> {
        let (stream, continuation) = AsyncStream<NetworkEvent>.makeStream(bufferingPolicy: .bufferingNewest(bufferSize))
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            state.next += 1
            state.subscribers[state.next] = continuation
            return state.next
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    func emit(_ event: NetworkEvent) {
        let targets = state.withLock { Array($0.subscribers.values) }
        for continuation in targets { continuation.yield(event) }
    }

    func finish() {
        let targets = state.withLock { state in
            state.finished = true
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for continuation in targets { continuation.finish() }
    }
}
