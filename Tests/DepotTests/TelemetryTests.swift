import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import InMemoryTracing
import MetricsTestKit
import Synchronization
import Testing
import Tracing

/// Metrics through swift-metrics and spans through swift-distributed-tracing,
/// with each package's in-memory backend injected per controller (no global
/// bootstrap, so tests stay independent).
@Suite(.timeLimit(.minutes(1)))
struct TelemetryTests {
    // MARK: Success

    @Test func aSuccessCountsItsOperationAndIsOneClientSpanWhoseTraceparentTheServerGot() async throws {
        let metrics = TestMetrics()
        let tracer = W3CTracer()
        try await withServer { server in
            try await withController(AsyncHTTPClientTransport(), baseURL: server.baseURL, configure: {
                $0.observability.metricsFactory = metrics
                $0.observability.tracer = tracer
            }) { controller in
                // Given a screen's span around the call
                let parent = tracer.startSpan("screen", context: .topLevel)
                // When an operation succeeds
                let url = server.baseURL.appending(path: DemoServer.Fault.echoHeaders.path)
                let response = try await ServiceContext.$current.withValue(parent.context) {
                    try await controller.perform(FetchRaw(url: url))
                }
                parent.end()
                #expect(response.status == 200)

                // Then it is counted by name and status class, timed, and its bytes counted
                let name = FetchRaw(url: url).name
                #expect(try metrics.expectCounter(OperationMetrics.started, [("operation", name)]).totalValue == 1)
                #expect(try metrics.expectCounter(OperationMetrics.finished, [("operation", name), ("status", "2xx")]).totalValue == 1)
                #expect(try metrics.expectTimer(OperationMetrics.duration, [("operation", name), ("status", "2xx")]).values.count == 1)
                #expect(try metrics.expectCounter(OperationMetrics.bytes, [("operation", name)]).totalValue == Int64(response.body.count))
                #expect(metrics.counters(label: OperationMetrics.failed).isEmpty)

                // And its transfer is one client span, a child of the caller's, with HTTP attributes
                let span = try #require(tracer.recorder.finishedSpans.first { $0.operationName == "GET" })
                #expect(span.kind == .client)
                #expect(span.parentSpanID == parent.spanID)
                #expect(span.traceID == parent.traceID)
                #expect(span.attributes["http.request.method"]?.toSpanAttribute() == "GET")
                #expect(span.attributes["url.full"]?.toSpanAttribute() == .string(url.absoluteString))
                #expect(span.attributes["server.address"]?.toSpanAttribute() == "127.0.0.1")
                #expect(span.attributes["server.port"]?.toSpanAttribute() == .int64(Int64(server.port)))
                #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == 200)
                #expect(span.attributes["depot.operation"]?.toSpanAttribute() == .string(name))
                #expect(span.status == nil)

                // And the server received the span's W3C traceparent
                let headers = try #require(server.lastRequestHeaders(for: .echoHeaders))
                #expect(headers["traceparent"] == W3CTracer.traceparent(span.spanContext))
            }
        }
    }

    // MARK: A 503, retried, then failed

    @Test func a503RetriedThenFailedIsOneFailureOneRetryAndTwoErrorSpans() async throws {
        let metrics = TestMetrics()
        let tracer = W3CTracer()
        try await withServer { server in
            try await withController(AsyncHTTPClientTransport(), baseURL: server.baseURL, configure: {
                $0.observability.metricsFactory = metrics
                $0.observability.tracer = tracer
                $0.retries.policy = RetryPolicy(maximumAttempts: 2, baseDelay: .milliseconds(1))
            }) { controller in
                // When a GET gets 503 twice
                let url = server.baseURL.appending(path: DemoServer.Fault.status(503).path)
                let error = await #expect(throws: DepotError.self) { try await controller.perform(FetchRaw(url: url)) }
                #expect(error?.status == 503)
                #expect(server.requestCount(for: .status(503)) == 2)

                // Then it started once, was retried once and failed once as a 5xx
                let name = FetchRaw(url: url).name
                #expect(try metrics.expectCounter(OperationMetrics.started, [("operation", name)]).totalValue == 1)
                #expect(try metrics.expectCounter(OperationMetrics.retries, [("operation", name)]).totalValue == 1)
                #expect(try metrics.expectCounter(OperationMetrics.failed, [("operation", name), ("status", "5xx")]).totalValue == 1)
                #expect(try metrics.expectTimer(OperationMetrics.duration, [("operation", name), ("status", "5xx")]).values.count == 1)
                #expect(metrics.counters(label: OperationMetrics.finished).isEmpty)

                // And each attempt is a span with the status and an error status; the second is a resend
                let spans = tracer.recorder.finishedSpans
                #expect(spans.count == 2)
                for span in spans {
                    #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == 503)
                    #expect(span.attributes["error.type"]?.toSpanAttribute() == "503")
                    #expect(span.status?.code == .error)
                }
                #expect(spans.first?.attributes["http.request.resend_count"] == nil)
                #expect(spans.last?.attributes["http.request.resend_count"]?.toSpanAttribute() == 1)
                // Both attempts are roots of one trace each here (no caller span), with their own ids
                #expect(Set(spans.map(\.spanID)).count == 2)

                // And the server received the last attempt's traceparent
                let last = try #require(spans.last)
                #expect(server.lastRequestHeaders(for: .status(503))?["traceparent"] == W3CTracer.traceparent(last.spanContext))
            }
        }
    }

    // MARK: Offline

    @Test func anOfflineFailureIsAnErrorSpanAndMovesTheGauges() async throws {
        let metrics = TestMetrics()
        let tracer = W3CTracer()
        let transport = FixtureTransport(["/ping": .data(Data("pong".utf8))])
        transport.isOffline = true
        // The controller posts an event's notification after it recorded the
        // event's metrics: a limit's notification says its gauge has it.
        let center = NotificationCenter()
        let (limits, limitChanged) = AsyncStream.makeStream(of: Int.self)
        let observer = center.addObserver(forName: .depotConcurrencyChanged, object: nil, queue: nil) { note in
            guard let event = note.userInfo?[NetworkEvent.UserInfoKey.event] as? NetworkEvent,
                  case .concurrencyChanged(let limit) = event.detail else { return }
            limitChanged.yield(limit)
        }
        defer { center.removeObserver(observer) }
        let limitsRecorded = Recorder(limits)
        let controller = NetworkController(configuration: .init(
            baseURL: URL(string: "http://fixtures.test")!,
            transport: transport,
            observability: .init(metricsFactory: metrics, tracer: tracer, notificationCenter: center)
        ))
        // Given the gauges start at the controller's quality and limit
        #expect(try metrics.expectGauge(OperationMetrics.quality).lastValue == Double(ConnectionQuality.good.rawValue))
        #expect(try metrics.expectGauge(OperationMetrics.limit).lastValue == 4)

        // When a fail-fast GET finds no network
        let error = await #expect(throws: DepotError.self) { try await controller.perform(Ping()) }
        #expect(error?.code == .offline)

        // Then it failed with no status, and the quality and limit gauges say offline
        let name = Ping().name
        #expect(try metrics.expectCounter(OperationMetrics.failed, [("operation", name), ("status", "error")]).totalValue == 1)
        #expect(try metrics.expectGauge(OperationMetrics.quality).lastValue == 0)
        _ = try await limitsRecorded.next { $0 == 0 }
        #expect(try metrics.expectGauge(OperationMetrics.limit).lastValue == 0)

        // And its span failed without a status code, with the context injected all the same
        let span = try #require(tracer.recorder.finishedSpans.first)
        #expect(span.status?.code == .error)
        #expect(span.attributes["error.type"]?.toSpanAttribute() == "offline")
        #expect(span.attributes["http.response.status_code"] == nil)
        #expect(span.attributes["server.address"]?.toSpanAttribute() == "fixtures.test")
        #expect(span.attributes["server.port"]?.toSpanAttribute() == 80)
        #expect(span.errors.count == 1)
        #expect(tracer.injections.values.withLock { $0 } == [W3CTracer.traceparent(span.spanContext)])
        _ = await controller.shutdown(grace: .zero)
    }

    // MARK: Events made into metrics

    @Test func aCancelledOperationCountsAsFailedCancelledAndAStartIsCountedOnce() throws {
        let metrics = TestMetrics()
        let observer = OperationMetrics(factory: metrics)
        let ticket = Ticket.ID(rawValue: 1)
        for detail: NetworkEvent.Detail in [.enqueued(priority: .normal, category: .default), .started(attempt: 1), .started(attempt: 1), .cancelled] {
            observer.observe(NetworkEvent(time: .milliseconds(5), ticket: ticket, operation: "Op", detail: detail))
        }
        #expect(try metrics.expectCounter(OperationMetrics.started, [("operation", "Op")]).totalValue == 1)
        #expect(try metrics.expectCounter(OperationMetrics.failed, [("operation", "Op"), ("status", "cancelled")]).totalValue == 1)

        // A ticket that joins another's transfer starts with it, once
        let joiner = Ticket.ID(rawValue: 2)
        for detail: NetworkEvent.Detail in [.enqueued(priority: .normal, category: .default), .coalesced(into: ticket), .started(attempt: 1), .finished(.init(status: 200, bytes: 4, duration: .zero, sample: nil))] {
            observer.observe(NetworkEvent(time: .milliseconds(5), ticket: joiner, operation: "Op", detail: detail))
        }
        #expect(try metrics.expectCounter(OperationMetrics.started, [("operation", "Op")]).totalValue == 2)
        #expect(try metrics.expectCounter(OperationMetrics.finished, [("operation", "Op"), ("status", "2xx")]).totalValue == 1)
    }

    @Test func statusClasses() {
        #expect(OperationMetrics.statusClass(204) == "2xx")
        #expect(OperationMetrics.statusClass(304) == "3xx")
        #expect(OperationMetrics.statusClass(404) == "4xx")
        #expect(OperationMetrics.statusClass(503) == "5xx")
        #expect(OperationMetrics.statusClass(nil) == "error")
        #expect(OperationMetrics.statusClass(99) == "error")
    }

    @Test func spanURLsKeepNoQueryValuesNorPasswords() {
        let url = URL(string: "https://ann:secret@api.test/search?q=cats&token=abc")!
        #expect(Telemetry.redactedForSpan(url) == "https://api.test/search?q=REDACTED&token=REDACTED")
        #expect(Telemetry.redactedForSpan(URL(string: "http://api.test/a")!) == "http://api.test/a")
    }

    // MARK: No backend

    @Test func withoutABackendNothingIsMade() {
        // Nothing in this process bootstraps either system: the defaults are the no-ops.
        let defaults = NetworkController(configuration: .init(transport: FixtureTransport(), observability: .init(notificationCenter: nil)))
        #expect(defaults.telemetry.metrics == nil)
        #expect(defaults.telemetry.tracer == nil)
        #expect(defaults.telemetry.parentContext() == nil)
        let off = NetworkController(configuration: .init(transport: FixtureTransport(), observability: .init(metricsFactory: nil, tracer: nil, notificationCenter: nil)))
        #expect(off.telemetry.metrics == nil)
        #expect(off.telemetry.tracer == nil)
    }
}

private struct Ping: NetworkOperation {
    typealias Output = NetworkResponse
    var offlineBehavior: OfflineBehavior = .failFast
    var request: NetworkRequest { .get("ping") }
}

/// ``InMemoryTracer`` with W3C-shaped ids, injecting a W3C `traceparent` the
/// way a real backend's propagator does (InMemoryTracer injects its own keys).
struct W3CTracer: Tracer {
    let recorder: InMemoryTracer
    /// Every `traceparent` injected, in order.
    let injections = Injections()

    final class Injections: Sendable {
        let values = Mutex<[String]>([])
    }

    init() {
        let traces = Atomic<UInt64>(0)
        let spans = Atomic<UInt64>(0)
        recorder = InMemoryTracer(idGenerator: .init(
            nextTraceID: { String(format: "%032llx", traces.wrappingAdd(1, ordering: .relaxed).newValue) },
            nextSpanID: { String(format: "%016llx", spans.wrappingAdd(1, ordering: .relaxed).newValue) }
        ))
    }

    static func traceparent(_ context: InMemorySpanContext) -> String {
        "00-\(context.traceID)-\(context.spanID)-01"
    }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String, context: @autoclosure () -> ServiceContext, ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant, function: String, file fileID: String, line: UInt
    ) -> InMemorySpan {
        recorder.startSpan(operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line)
    }

    func forceFlush() { recorder.forceFlush() }

    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject) where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        let value = Self.traceparent(span)
        injections.values.withLock { $0.append(value) }
        injector.inject(value, forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract) where Extract.Carrier == Carrier {
        recorder.extract(carrier, into: &context, using: extractor)
    }
}

extension TelemetryTests {
    /// With a bootstrapped tracer, AsyncHTTPClient would make a span of its own
    /// and add a second `traceparent`: the transport turns the client's off.
    @Test func theAsyncHTTPClientTransportLeavesTracingToTheController() async {
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        configuration.tracing.tracer = W3CTracer()
        let transport = AsyncHTTPClientTransport(configuration: configuration)
        #expect(transport.client.tracer == nil)
        await transport.shutdown()
    }
}

extension TelemetryTests {
    /// Spans leave the app for a tracing backend: their URL keeps no query
    /// value and their recorded error is redacted like events and logs.
    @Test func aSpanCarriesNoSecret() async throws {
        struct FetchWithToken: NetworkOperation {
            typealias Output = NetworkResponse
            var offlineBehavior: OfflineBehavior = .failFast
            var request: NetworkRequest { .get("search?q=cats&token=s3cret") }
        }
        let tracer = W3CTracer()
        let controller = NetworkController(configuration: .init(
            baseURL: URL(string: "https://api.test")!,
            transport: ScriptedTransport { request in throw DepotError(.transport, detail: "refused \(request.url.absoluteString)") },
            retries: .init(policy: .never),
            observability: .init(tracer: tracer, notificationCenter: nil)
        ))
        await #expect(throws: DepotError.self) { try await controller.perform(FetchWithToken()) }
        let span = try #require(tracer.recorder.finishedSpans.first)
        #expect(span.attributes["url.full"]?.toSpanAttribute() == "https://api.test/search?q=REDACTED&token=REDACTED")
        let recorded = try #require(span.errors.first?.error)
        #expect(!"\(recorded)".contains("s3cret"))
        #expect("\(recorded)".contains("refused"))
        _ = await controller.shutdown(grace: .zero)
    }
}
