import CoreMetrics
import Depot
import Foundation
import InMemoryTracing
import MetricsTestKit
import Testing
import Tracing

// Sources/Depot/Depot.docc/Observability.md

enum ObservabilityExamples {
    /// Compiled, never run: bootstrapping is once per process.
    static func bootstrapAtLaunch(metrics: any MetricsFactory, tracer: any Tracer, api: URL) -> NetworkController {
        MetricsSystem.bootstrap(metrics)          // swift-prometheus, swift-otel, ...
        InstrumentationSystem.bootstrap(tracer)   // swift-otel, ...
        let controller = NetworkController(configuration: .init(baseURL: api))
        return controller
    }

    static func inTests(fixtureURL: URL) async throws {
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        var configuration = NetworkController.Configuration(transport: FileTransport())
        configuration.observability.metricsFactory = metrics
        configuration.observability.tracer = tracer
        let controller = NetworkController(configuration: configuration)

        _ = try await controller.perform(FetchContactsFile(url: fixtureURL))
        let finished = try metrics.expectCounter("depot.operations.finished", [("operation", "FetchContactsFile"), ("status", "2xx")])
        #expect(finished.totalValue == 1)
        #expect(tracer.finishedSpans.map(\.operationName) == ["GET"])
    }
}
