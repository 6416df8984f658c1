import GRDB
import Synchronization

/// Has a `ValueObservation` hand over its first value synchronously, inside
/// `start`, on the caller's thread (a results controller's: the main actor),
/// and each later value on the thread GRDB computed it on, but never before
/// ``release()``.
///
/// The first fetch of a results controller is then the observation's own: one
/// fetch instead of two, and GRDB's guarantee that no commit made after that
/// fetch is missed. Later values must only be handed on (to a stream), never
/// processed where they arrive.
///
/// Why the hold: on a pool GRDB queues its catch-up fetch on the writer before
/// `start` hands over the first value, and that fetch can finish first, on
/// another thread. Run at once, the later value would arrive first.
final class FirstValueNowScheduler: ValueObservationScheduler {
    /// Whether later values run at once, and the ones waiting for that, in order.
    private let state = Mutex<(released: Bool, held: [@Sendable () -> Void])>((false, []))

    func immediateInitialValue() -> Bool { true }

    func schedule(_ action: @escaping @Sendable () -> Void) {
        // Under the lock, so that a value never overtakes the held ones; an
        // action only hands a value to a stream.
        state.withLock { state in
            if state.released { action() } else { state.held.append(action) }
        }
    }

    /// Lets later values through, the held ones first. Call it once `start` has returned.
    func release() {
        state.withLock { state in
            for action in state.held { action() }
            state.held = []
            state.released = true
        }
    }
}

/// The first value (or error) an observation delivered: the one delivered
/// inside `start` under ``FirstValueNowScheduler``.
final class FirstValue<Value: Sendable>: Sendable {
    private let state = Mutex<Result<Value, any Error>?>(nil)

    /// Keeps `result` if nothing came before it, and says whether it did.
    func take(_ result: Result<Value, any Error>) -> Bool {
        state.withLock { state in
            guard state == nil else { return false }
            state = result
            return true
        }
    }

    /// The first value or error, once delivered.
    var result: Result<Value, any Error>? {
        state.withLock { $0 }
    }
}
