import GRDB
import Synchronization

/// Has a `ValueObservation` hand over its first value synchronously, inside
/// `start`, on the caller's thread (a results controller's: the main actor),
/// and each later value at once on the thread GRDB computed it on.
///
/// The first fetch of a results controller is then the observation's own: one
/// fetch instead of two, and GRDB's guarantee that no commit made after that
/// fetch is missed. Later values must only be handed on (to a stream), never
/// processed where they arrive.
struct FirstValueNowScheduler: ValueObservationScheduler {
    func immediateInitialValue() -> Bool { true }

    func schedule(_ action: @escaping @Sendable () -> Void) {
        action()
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
