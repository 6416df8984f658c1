import Depot
import Foundation
import Synchronization

/// What a live feed hears from its stream, as it happens. Called from the
/// stream's task, after each commit.
struct EventStreamObserver: Sendable {
    /// The response head arrived: the stream is up.
    var opened: @Sendable () -> Void = {}
    /// A batch of changes landed with this cursor.
    var applied: @Sendable (_ changes: Int, _ cursor: String) -> Void = { _, _ in }
    /// The feed's changes, as they landed.
    var delivered: @Sendable (any Sendable) -> Void = { _ in }
    /// An event could not be processed and was skipped.
    var skipped: @Sendable (DepotError) -> Void = { _ in }
}

/// A feed's server-sent events stream, as a long-lived operation: it holds no
/// concurrency slot, has only an idle deadline (heartbeats count), and each
/// batch of events that arrive together is applied in ONE transaction with
/// the last one's id as the cursor. Each attempt asks from the kept cursor
/// (`Last-Event-ID`), so a reconnect resumes where the cache is.
struct EventStreamOperation<Feed: ChangeFeed>: StreamingNetworkOperation {
    /// How the stream ended.
    enum End: Sendable, Equatable {
        /// The server closed it; reconnect, after `retry` if it set one.
        case closed(retry: Duration?)
        /// The server cannot resume from the cursor: catch up first.
        case startOver
        /// Another writer moved the cursor: reconnect from the kept one.
        case superseded
        /// `204 No Content`: the server asks not to reconnect.
        case stopped
    }

    let feed: Feed
    let eventsRequest: NetworkRequest
    let idleDeadline: Duration
    let maximumEventSize: Int
    let observer: EventStreamObserver
    /// The cursor this attempt resumes from, as `prepare` sent it: the sink's
    /// first write must find the same one kept (attempts run one at a time).
    let resumesFrom = ResumePoint()

    /// A cursor shared by the operation's copies.
    final class ResumePoint: Sendable {
        private let value = Mutex<String?>(nil)

        func withLock<T>(_ body: (inout String?) -> T) -> T {
            value.withLock { body(&$0) }
        }
    }

    var request: NetworkRequest { eventsRequest }
    var priority: Priority { feed.priority }
    var category: OperationCategory { feed.category }
    var name: String { "\(Feed.self) events" }
    var coalescing: Coalescing { .never }
    var timeout: Timeout { .idle(idleDeadline) }
    var isLongLived: Bool { true }

    func prepare(_ request: inout TransportRequest, context: OperationContext) async throws {
        request.headers["Accept"] = "text/event-stream"
        request.headers["Cache-Control"] = "no-cache"
        let store = try context.requireStore(for: name)
        let cursor = try await store.ledger.cursor(for: feed.syncKey)
        resumesFrom.withLock { $0 = cursor }
        if let cursor, !cursor.isEmpty {
            request.headers["Last-Event-ID"] = cursor
        } else {
            request.headers.remove(name: "Last-Event-ID")
        }
    }

    func validate(_ response: NetworkResponse) throws {
        guard (200..<300).contains(response.status) else {
            throw DepotError.forStatus(response.status, body: response.body, operation: name)
        }
        guard response.status == 204 || Self.isEventStream(response.headers["Content-Type"]) else {
            throw DepotError(.decoding, operation: name, status: response.status, detail: "expected Content-Type text/event-stream, got \(response.headers["Content-Type"].map { "\"\(Redaction.default.text($0))\"" } ?? "none")")
        }
    }

    static func isEventStream(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        return contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "text/event-stream"
    }

    func makeBodySink(for response: NetworkResponse, context: OperationContext) async throws -> Sink? {
        let store = try context.requireStore(for: name)
        let base = resumesFrom.withLock { $0 }
        observer.opened()
        return Sink(writer: FeedWriter(feed: feed, store: store), base: base, maximumEventSize: maximumEventSize, observer: observer, name: name)
    }

    func process(_ response: NetworkResponse, streamedTo sink: Sink, context: OperationContext) async throws -> End {
        try sink.end()
    }

    func process(_ response: NetworkResponse, context: OperationContext) async throws -> End {
        // 204 (WHATWG: do not reconnect), or an empty body: nothing to apply.
        response.status == 204 ? .stopped : .closed(retry: nil)
    }

    /// Parses the body and applies its events as they arrive.
    final class Sink: ResponseBodySink {
        struct State {
            var parser: ServerSentEventParser
            /// The cursor the kept one must still be for the next write.
            var base: String?
            var end: End?
            var failure: DepotError?
        }

        let writer: FeedWriter<Feed>
        let observer: EventStreamObserver
        let name: String
        // The controller calls `receive` one chunk at a time, never concurrently.
        let state: Mutex<State>

        init(writer: FeedWriter<Feed>, base: String?, maximumEventSize: Int, observer: EventStreamObserver, name: String) {
            self.writer = writer
            self.observer = observer
            self.name = name
            self.state = Mutex(State(parser: ServerSentEventParser(maximumEventSize: maximumEventSize), base: base))
        }

        func receive(_ chunk: Data) async throws {
            let parsed: Swift.Result<[ServerSentEvent], DepotError> = state.withLock { state in
                Swift.Result { () throws(DepotError) in try state.parser.parse(chunk) }
            }
            let events: [ServerSentEvent]
            switch parsed {
            case .success(let value): events = value
            case .failure(var failure):
                // An event past the size limit: the stream cannot go on.
                failure.operation = name
                state.withLock { $0.failure = failure }
                throw failure
            }
            guard !events.isEmpty else { return }
            try await apply(events)
        }

        /// Applies the events of one chunk: their changes in one transaction,
        /// up to a request to start over.
        private func apply(_ events: [ServerSentEvent]) async throws {
            var changes: [Feed.Change] = []
            var invalidations: [CacheInvalidation] = []
            var cursor: String?
            var skipped: [DepotError] = []
            var startsOver = false
            for event in events {
                let message: LiveMessage<Feed.Change>
                do {
                    message = try writer.feed.decodeEvent(event)
                } catch {
                    var failure = DepotError.wrap(error, operation: name, fallback: .decoding)
                    if failure.detail == nil { failure.detail = "event \(event.type) could not be processed" }
                    skipped.append(failure)
                    cursor = event.lastEventID
                    continue
                }
                switch message {
                case .changes(let more): changes += more
                case .invalidate(let targets): invalidations += targets
                case .ignore: break
                case .startOver: startsOver = true
                }
                if startsOver { break }
                cursor = event.lastEventID
            }
            let base = state.withLock { $0.base }
            if let cursor, !cursor.isEmpty || !changes.isEmpty || !invalidations.isEmpty {
                // An empty id keeps the cursor (the server sends none).
                let next = cursor.isEmpty ? (base ?? "") : cursor
                guard try await writer.write(changes, cursor: next, base: .cursor(base), invalidations: invalidations) else {
                    try stop(.superseded)
                }
                state.withLock { $0.base = next }
                observer.applied(changes.count, next)
                if !changes.isEmpty { observer.delivered(changes) }
            }
            for failure in skipped { observer.skipped(failure) }
            if startsOver { try stop(.startOver) }
        }

        private func stop(_ end: End) throws -> Never {
            state.withLock { $0.end = end }
            throw StreamStop()
        }

        /// How the stream ended, once the body is over.
        func end() throws -> End {
            try state.withLock { state in
                if let failure = state.failure { throw failure }
                if let end = state.end { return end }
                // A closed stream: an event it cut off is never applied.
                state.parser.finish()
                return .closed(retry: state.parser.reconnectionTime)
            }
        }

        func fail(_ error: DepotError) async {
            // Each batch committed on its own: nothing to undo.
            state.withLock { $0.parser.finish() }
        }
    }

    /// Thrown by the sink to stop reading; `end()` says why.
    struct StreamStop: Error {}
}
