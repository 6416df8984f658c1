import Hummingbird
import Synchronization

/// What arrived on the fault routes, per path (without the query), and which
/// responses their clients abandoned before the body ended: what a test
/// asserts on the server side.
final class RequestLog: Sendable {
    struct Entry: Sendable {
        var count = 0
        /// The headers of the last request, names lower-cased.
        var lastHeaders: [String: String] = [:]
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var abandoned: [String] = []
        var waiting: [UInt64: (path: String, continuation: CheckedContinuation<Void, Never>)] = [:]
        var next: UInt64 = 0
        var closed = false
    }

    private let state = Mutex(State())

    /// Records a request's arrival.
    func record(path: String, headers: [String: String]) {
        state.withLock { state in
            state.entries[path, default: Entry()].count += 1
            state.entries[path]?.lastHeaders = headers
        }
    }

    func entry(for path: String) -> Entry? { state.withLock { $0.entries[path] } }

    /// Records that the client of a response to `path` went away mid-body.
    func recordAbandoned(path: String) {
        let waiters = state.withLock { state in
            state.abandoned.append(path)
            let ids = state.waiting.filter { $0.value.path == path }.map(\.key)
            return ids.compactMap { state.waiting.removeValue(forKey: $0)?.continuation }
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Paths of abandoned responses, oldest first.
    var abandoned: [String] { state.withLock { $0.abandoned } }

    /// Returns once a response to `path` has been abandoned (at once if one was),
    /// or when the task is cancelled or the server stops.
    func waitUntilAbandoned(path: String) async {
        let id = state.withLock { state -> UInt64 in
            state.next += 1
            return state.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = state.withLock { state in
                    if state.closed || Task.isCancelled || state.abandoned.contains(path) { return true }
                    state.waiting[id] = (path, continuation)
                    return false
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiting.removeValue(forKey: id) }?.continuation.resume()
        }
    }

    /// Ends every wait, now and later (the server stops).
    func close() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return state.waiting.values.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Records every request to a fault route as it arrives, before it is handled.
struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = DemoRequestContext
    let log: RequestLog

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        if path.hasPrefix(FaultRoutes.prefix) {
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            log.record(path: path, headers: headers)
        }
        return try await next(request, context)
    }
}
