import Depot
import DepotTesting
import Foundation
import Testing

// The examples of doc comments in Sources/Depot/Conditions,
// Sources/Depot/Controller/Configuration.swift and Sources/DepotTesting,
// compiled so that they keep to the public API. (Not checked line by line as
// the articles are.)

enum DocCommentExamples {
    static func showLowBandwidthHint() {}

    static func concurrencyPolicy(api: URL) -> NetworkController {
        let controller = NetworkController(configuration: .init(baseURL: api, limits: .init(concurrency: .adaptive())))
        return controller
    }

    static func mapping() -> ConcurrencyPolicy {
        let policy = ConcurrencyPolicy.mapping([.offline: 0, .poor: 1, .good: 3])   // moderate → 1, excellent → 3
        return policy
    }

    static func connectionMonitor(api: URL) -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.conditions.monitor.samplesToChange = 5
        let controller = NetworkController(configuration: configuration)
        if controller.quality <= .poor { showLowBandwidthHint() }
        return controller
    }

    static func thresholds(api: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.conditions.monitor.thresholds = .init(moderate: 300_000, good: 1_000_000, excellent: 5_000_000)
        return configuration
    }

    static func qualityRules(api: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.conditions.rules = QualityRules(threshold: .moderate, pausedCategories: [.images], dropPriorityAtMost: nil)
        return configuration
    }

    static func retryBudget(api: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: api)
        configuration.retries.budget = RetryBudget(capacity: 20, depositPerSuccess: 0.2)
        return configuration
    }

    static func retryPolicy(error: DepotError, wallClock: Date, clock: ContinuousClock) async throws {
        var random = SystemRandomNumberGenerator()
        switch RetryPolicy.default.decision(for: error, method: .get, attempt: 1, now: wallClock, using: &random) {
        case .retry(let delay): try await clock.sleep(for: delay)
        case .doNotRetry: throw error   // (the doc comment names the reason)
        }
    }

    static func delayablePacing(base: URL) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: base)
        configuration.conditions.delayablePacing = .bandwidthDelay(roundTrips: 1)   // tighter than the default
        configuration.conditions.delayablePacing = .bandwidthDelay(roundTrips: 2, rangeBytes: nil)   // whole responses
        configuration.conditions.delayablePacing = .off                             // every delayable transfer starts at once
        return configuration
    }

    static func seededGenerator() {
        var random = SeededGenerator(seed: 42)
        let decision = RetryPolicy.default.decision(forStatus: 503, headers: [:], method: .get, attempt: 2, now: Date(), using: &random)
        print(decision.delay ?? .zero)   // the same every run
    }

    static func scriptedTransport(api: URL) async throws {
        let transport = ScriptedTransport()
        transport.respond(to: "/contacts", with: .status(200, body: Data(#"{"items": []}"#.utf8)).gated)
        let controller = NetworkController(configuration: .init(baseURL: api, transport: transport))
        controller.enqueue(FetchContacts())
        try await transport.waitingAtGate(atLeast: 1)   // the request is under way, held at the gate
        #expect(controller.activity.running == 1)
        transport.letThrough(1)
    }

    static func scriptedAnswers() -> [ScriptedTransport.Answer] {
        let redirect: ScriptedTransport.Answer = .respond { request in
            TransportResponse(status: 302, headers: ["Location": request.url.path + "/"], body: .empty)
        }
        return [.status(201, body: Data(#"{"id": 42}"#.utf8)), .failure(DepotError(.connectionLost)), .offline, redirect, .status(200).gated]
    }

    static func scriptedTransports() -> [ScriptedTransport] {
        let inOrder = ScriptedTransport(.status(503), .status(200))
        inOrder.respond(to: "/token", with: .status(401), .status(200))
        inOrder.respondToOtherPaths(with: .status(200, body: Data("{}".utf8)))
        let transport = ScriptedTransport { request in
            TransportResponse(status: request.method == .head ? 200 : 304, body: .empty)
        }
        return [inOrder, transport]
    }

    static func scriptedTransportForwarding() -> ScriptedTransport {
        let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
        transport.isOffline = true   // as if the network went away
        return transport
    }

    static func scriptedExchanges(_ transport: ScriptedTransport) throws {
        let exchanges = transport.exchanges
        let refreshed = try #require(exchanges.first { $0.request.url.path == "/token" && $0.status == 200 }?.answeredAt)
        let send = try #require(exchanges.first { $0.request.method == .post })
        #expect(send.sentAt > refreshed)
    }

    static func scriptedGate(_ transport: ScriptedTransport, controller: NetworkController) async throws {
        controller.enqueue(PublishPost(text: "hi"))
        try await transport.waitingAtGate(atLeast: 1)
        let first = try await transport.requests(atLeast: 1)[0]
        #expect(first.method == .post)
        transport.openGate()
    }

    static func streamedRoutes() -> [NetworkSimulator.Route] {
        let events = NetworkSimulator.Route(path: "/events") { request in
            let resumeAfter = Int(request.headers["Last-Event-ID"] ?? "") ?? 0
            return NetworkSimulator.StreamScript { index in
                guard index < 1_000_000 else { return .drop() }
                let id = resumeAfter + index + 1
                return .send("id: \(id)\ndata: tick \(id)\n\n", after: .milliseconds(10))
            }
        }
        let dropping = NetworkSimulator.Route(path: "/events") { request in
            NetworkSimulator.StreamScript(steps: [.send("id: 1\ndata: x\n\n", after: .seconds(1)), .drop(after: .seconds(5))])
        }
        let ticking = NetworkSimulator.StreamScript { index in .send("data: \(index)\n\n", after: .seconds(1)) }
        let steps: [NetworkSimulator.StreamScript.Step] = [
            .send(Data("data: x\n\n".utf8), after: .seconds(1)), .send("id: 1\ndata: x\n\n", after: .seconds(1)),
            .close(after: .seconds(5)), .drop(after: .seconds(5)),
        ]
        _ = (ticking, steps)
        return [events, dropping]
    }

    static func serverSentEvents(_ response: TransportResponse) async throws -> String {
        var parser = ServerSentEventParser()
        for try await chunk in response.body {
            for event in try parser.parse(chunk) {
                print(event.type, event.data)
            }
        }
        parser.finish()                       // an event the stream cut off is discarded
        let resumeFrom = parser.lastEventID   // send it as Last-Event-ID when reconnecting
        var bounded = ServerSentEventParser(maximumEventSize: 64 * 1024)
        _ = try bounded.parse(Data("data: hel".utf8))        // []
        let events = try bounded.parse(Data("lo\n\n".utf8))  // [ServerSentEvent(data: "hello")]
        var count = 0
        try bounded.parse(Data("data: x\n\n".utf8)) { _ in count += 1 }
        _ = try bounded.parse(Data("id: 9\ndata: cut off".utf8))
        bounded.finish()   // nothing dispatched; bounded.lastEventID is unchanged
        #expect(events == [ServerSentEvent(data: "hello")] && count == 1)
        return resumeFrom
    }

    static func configuration() -> NetworkController {
        let controller = NetworkController(configuration: .init(
            baseURL: URL(string: "http://127.0.0.1:8080")!,
            adapters: [DefaultHeaders(["Accept": "application/json"])]
        ))
        return controller
    }
}
