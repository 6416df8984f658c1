import CoreMetrics
import Foundation
import Instrumentation
import Synchronization
import Tracing

/// Metrics through swift-metrics and a span per transfer through
/// swift-distributed-tracing, beside Depot's own events and trace.
///
/// Both are off unless the configuration holds a backend: a `nil` factory or
/// tracer, swift-metrics' `NOOPMetricsHandler` and tracing's `NoOpTracer` all
/// leave ``metrics`` and ``tracer`` `nil`, and each hook is one `nil` check.
/// Metric objects are made once per controller (the gauges) or once per
/// operation name and status class (counters, the timer), never per request.
final class Telemetry: Sendable {
    /// The operations' counters, timer and the controller's gauges; `nil` without a backend.
    let metrics: OperationMetrics?
    /// The tracer making each transfer's span; `nil` without one.
    let tracer: (any Tracer)?

    init(factory: (any MetricsFactory)?, tracer: (any Tracer)?, quality: ConnectionQuality, limit: Int) {
        if let factory, !(factory is NOOPMetricsHandler) {
            let metrics = OperationMetrics(factory: factory)
            metrics.quality.record(quality.rawValue)
            metrics.limit.record(limit)
            self.metrics = metrics
        } else {
            self.metrics = nil
        }
        if let tracer, !(tracer is NoOpTracer) {
            self.tracer = tracer
        } else {
            self.tracer = nil
        }
    }

    /// The caller's service context, read at submit: the parent of the
    /// operation's spans (a job's task may be launched from another job's).
    func parentContext() -> ServiceContext? {
        tracer == nil ? nil : ServiceContext.current
    }
}

/// Depot's metrics: what ``observe(_:)`` makes of each event, plus the bytes
/// each transfer received.
///
/// | label | kind | dimensions |
/// |---|---|---|
/// | `depot.operations.started` | counter (once per operation; joining another's transfer counts) | `operation` |
/// | `depot.operations.finished` | counter | `operation`, `status` (`2xx`, `3xx`, ...) |
/// | `depot.operations.failed` | counter | `operation`, `status` (`4xx`, `5xx`, `error`, `cancelled`) |
/// | `depot.operation.duration` | timer | `operation`, `status` |
/// | `depot.bytes.received` | counter | `operation` |
/// | `depot.retries` | counter | `operation` |
/// | `depot.concurrency.limit` | gauge | |
/// | `depot.connection.quality` | gauge (0 offline ... 4 excellent) | |
final class OperationMetrics: Sendable {
    static let started = "depot.operations.started"
    static let finished = "depot.operations.finished"
    static let failed = "depot.operations.failed"
    static let duration = "depot.operation.duration"
    static let bytes = "depot.bytes.received"
    static let retries = "depot.retries"
    static let limit = "depot.concurrency.limit"
    static let quality = "depot.connection.quality"

    /// An operation name's counters.
    struct PerOperation: Sendable {
        let started: Counter
        let bytes: Counter
        let retries: Counter
    }

    /// An operation name's counter and timer for one outcome and status class.
    struct PerOutcome: Sendable {
        let count: Counter
        let duration: CoreMetrics.Timer
    }

    struct OutcomeKey: Hashable, Sendable {
        let operation: String
        let status: String
        let failed: Bool
    }

    /// A ticket between its `enqueued` event and its end.
    struct Open {
        let enqueuedAt: Duration
        var started = false
    }

    private struct State {
        var operations: [String: PerOperation] = [:]
        var outcomes: [OutcomeKey: PerOutcome] = [:]
        var open: [Ticket.ID: Open] = [:]
    }

    let factory: any MetricsFactory
    let limit: Gauge
    let quality: Gauge
    /// A leaf lock: the factory (user code) is never called under it.
    private let state = Mutex(State())

    init(factory: any MetricsFactory) {
        self.factory = factory
        limit = Gauge(label: Self.limit, factory: factory)
        quality = Gauge(label: Self.quality, factory: factory)
    }

    /// Counts what `event` tells: call it outside every lock (the backend is user code).
    func observe(_ event: NetworkEvent) {
        switch event.detail {
        case .enqueued:
            guard let ticket = event.ticket else { return }
            state.withLock { $0.open[ticket] = Open(enqueuedAt: event.time) }
        case .started, .coalesced:
            // Once per operation: a job that waited in the queue for the network starts
            // again, and one that joined another's transfer starts with it.
            guard let ticket = event.ticket, let name = event.operation else { return }
            let first = state.withLock { state -> Bool in
                guard state.open[ticket]?.started == false else { return false }
                state.open[ticket]?.started = true
                return true
            }
            if first { operation(name).started.increment() }
        case .retried:
            guard let name = event.operation else { return }
            operation(name).retries.increment()
        case .finished(let finished):
            end(event, status: Self.statusClass(finished.status), failed: false)
        case .failed(let error):
            end(event, status: Self.statusClass(error.status), failed: true)
        case .cancelled:
            end(event, status: "cancelled", failed: true)
        case .qualityChanged(_, let new):
            quality.record(new.rawValue)
        case .concurrencyChanged(let limit):
            self.limit.record(limit)
        default:
            break
        }
    }

    /// Body bytes one transfer received.
    func received(_ bytes: Int64, operation name: String) {
        guard bytes > 0 else { return }
        operation(name).bytes.increment(by: bytes)
    }

    private func end(_ event: NetworkEvent, status: String, failed: Bool) {
        guard let ticket = event.ticket, let name = event.operation else { return }
        let open = state.withLock { $0.open.removeValue(forKey: ticket) }
        let metrics = outcome(OutcomeKey(operation: name, status: status, failed: failed))
        metrics.count.increment()
        if let open { metrics.duration.recordNanoseconds(Self.nanoseconds(event.time - open.enqueuedAt)) }
    }

    private func operation(_ name: String) -> PerOperation {
        if let known = state.withLock({ $0.operations[name] }) { return known }
        let dimensions = [("operation", name)]
        let made = PerOperation(
            started: Counter(label: Self.started, dimensions: dimensions, factory: factory),
            bytes: Counter(label: Self.bytes, dimensions: dimensions, factory: factory),
            retries: Counter(label: Self.retries, dimensions: dimensions, factory: factory)
        )
        // Made outside the lock; a racing maker's objects win, so each name has one set.
        return state.withLock { state in
            if let known = state.operations[name] { return known }
            state.operations[name] = made
            return made
        }
    }

    private func outcome(_ key: OutcomeKey) -> PerOutcome {
        if let known = state.withLock({ $0.outcomes[key] }) { return known }
        let dimensions = [("operation", key.operation), ("status", key.status)]
        let made = PerOutcome(
            count: Counter(label: key.failed ? Self.failed : Self.finished, dimensions: dimensions, factory: factory),
            duration: CoreMetrics.Timer(label: Self.duration, dimensions: dimensions, factory: factory)
        )
        return state.withLock { state in
            if let known = state.outcomes[key] { return known }
            state.outcomes[key] = made
            return made
        }
    }

    private static let classes = ["1xx", "2xx", "3xx", "4xx", "5xx"]

    /// `2xx`, `4xx`, ...; `error` when no response arrived (or its status was odd).
    static func statusClass(_ status: Int?) -> String {
        guard let status, (100..<600).contains(status) else { return "error" }
        return classes[status / 100 - 1]
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// One attempt's client span, with the HTTP semantic attributes of
/// OpenTelemetry's conventions.
struct AttemptSpan {
    let span: any Span

    /// The response arrived (whatever its status).
    func responded(status: Int, bytes: Int64) {
        span.attributes["http.response.status_code"] = status
        span.attributes["http.response.body.size"] = bytes
        if status >= 400 {
            span.attributes["error.type"] = String(status)
            span.setStatus(SpanStatus(code: .error))
        }
    }

    /// No response arrived: the transfer failed.
    func failed(_ error: DepotError) {
        if let status = error.status { span.attributes["http.response.status_code"] = status }
        span.attributes["error.type"] = error.code.rawValue
        span.recordError(error)
        span.setStatus(SpanStatus(code: .error, message: error.code.rawValue))
    }

    func end() {
        span.end()
    }
}

/// Writes the tracer's headers (W3C `traceparent`, ...) into a request,
/// replacing any of the same name.
struct HeaderFieldsInjector: Injector {
    func inject(_ value: String, forKey key: String, into headers: inout HeaderFields) {
        headers[key] = value
    }
}

/// A client span per attempt.
extension Telemetry {
    /// Starts the span of one attempt's transfer and injects its context into
    /// `request`'s headers; `nil` without a tracer.
    func startSpan(operation name: String, request: inout TransportRequest, attempt: Int, parent: ServiceContext?) -> AttemptSpan? {
        guard let tracer else { return nil }
        let method = request.method.rawValue
        let span = tracer.startSpan(method, context: parent ?? .topLevel, ofKind: .client)
        let url = request.url
        span.attributes["http.request.method"] = method
        span.attributes["url.full"] = Self.redactedForSpan(url)
        span.attributes["url.scheme"] = url.scheme
        if let host = url.host { span.attributes["server.address"] = host }
        if let port = url.port ?? (url.scheme == "https" ? 443 : url.scheme == "http" ? 80 : nil) {
            span.attributes["server.port"] = port
        }
        if attempt > 1 { span.attributes["http.request.resend_count"] = attempt - 1 }
        span.attributes["depot.operation"] = name
        tracer.inject(span.context, into: &request.headers, using: HeaderFieldsInjector())
        return AttemptSpan(span: span)
    }

    /// The URL without user, password and query values (`?token=REDACTED`).
    static func redactedForSpan(_ url: URL) -> String {
        guard url.query != nil || url.user != nil || url.password != nil,
              var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        else { return url.absoluteString }
        components.user = nil
        components.password = nil
        components.queryItems = components.queryItems?.map { URLQueryItem(name: $0.name, value: $0.value == nil ? nil : "REDACTED") }
        return components.string ?? url.absoluteString
    }
}
