import Depot
import DepotTesting
import Foundation
import Testing

/// DepotTesting's ``ScriptedTransport``: its script, its gate and the facts a
/// test awaits on it, its record, and its offline switch.
@Suite(.timeLimit(.minutes(1))) struct ScriptedTransportTests {
    static func request(_ path: String, _ method: NetworkRequest.Method = .get) -> TransportRequest {
        TransportRequest(url: URL(string: "http://script.test\(path)")!, method: method)
    }

    static func status(_ transport: ScriptedTransport, _ path: String) async -> Int? {
        try? await transport.send(request(path)).status
    }

    @Test func answersByPathThenInOrderWithTheLastOneAgain() async throws {
        let transport = ScriptedTransport(.status(503), .status(200))
        transport.respond(to: "/token", with: .status(401), .status(201))
        #expect(await Self.status(transport, "/token") == 401)
        #expect(await Self.status(transport, "/a") == 503)
        #expect(await Self.status(transport, "/token") == 201)
        #expect(await Self.status(transport, "/b") == 200)
        #expect(await Self.status(transport, "/token") == 201)
        #expect(await Self.status(transport, "/a") == 200)
        // With no answers of its own, a path gets the others' again; and with none given, 404.
        transport.respond(to: "/token")
        #expect(await Self.status(transport, "/token") == 200)
        #expect(await Self.status(ScriptedTransport(), "/a") == 404)
    }

    @Test func aStatusAnswerCarriesItsBodyAndLength() async throws {
        let transport = ScriptedTransport(.status(201, headers: ["ETag": "\"1\""], body: Data("made".utf8)))
        let response = try await transport.send(Self.request("/posts", .post))
        var body = Data()
        for try await chunk in response.body { body.append(chunk) }
        #expect(response.status == 201 && body == Data("made".utf8))
        #expect(response.headers["Content-Length"] == "4" && response.headers["ETag"] == "\"1\"")
    }

    @Test func failuresOfflineAndTheSwitchFailAsTransportsDo() async throws {
        let transport = ScriptedTransport(.failure(DepotError(.connectionLost)), .offline, .status(200))
        let lost = await DepotError.from { _ = try await transport.send(Self.request("/a")) }
        #expect(lost?.code == .connectionLost)
        let refused = await DepotError.from { _ = try await transport.send(Self.request("/a")) }
        #expect(refused?.code == .offline)
        transport.isOffline = true
        let switchedOff = await DepotError.from { _ = try await transport.send(Self.request("/a")) }
        #expect(switchedOff?.code == .offline)
        transport.isOffline = false
        #expect(await Self.status(transport, "/a") == 200)
        #expect(transport.exchanges.map(\.status) == [nil, nil, nil, 200])
        #expect(transport.exchanges.map { ($0.failure as? DepotError)?.code } == [.connectionLost, .offline, .offline, nil])
    }

    @Test func theGateHoldsRequestsUntilTheTestLetsThemThrough() async throws {
        let transport = ScriptedTransport(.status(200).gated)
        let first = Task { await Self.status(transport, "/first") }
        #expect(try await transport.waitingAtGate(atLeast: 1).map(\.url.path) == ["/first"])
        let second = Task { await Self.status(transport, "/second") }
        #expect(try await transport.waitingAtGate(atLeast: 2).map(\.url.path) == ["/first", "/second"])
        #expect(transport.exchanges.map(\.answeredAt) == [nil, nil])

        // One through, the longest-waiting first
        transport.letThrough(1)
        #expect(await first.value == 200)
        #expect(transport.waitingAtGate.map(\.url.path) == ["/second"])

        // A pass nobody waits for goes to the next request to come
        transport.letThrough(2)
        #expect(await second.value == 200)
        #expect(await Self.status(transport, "/third") == 200)
        let fourth = Task { await Self.status(transport, "/fourth") }
        try await transport.waitingAtGate(atLeast: 1)

        // Open for good: the one waiting goes, and so do later ones
        transport.openGate()
        #expect(await fourth.value == 200)
        #expect(await Self.status(transport, "/fifth") == 200)
    }

    @Test func aRequestCancelledAtTheGateFailsAsCancelled() async throws {
        let transport = ScriptedTransport(.status(200).gated)
        let held = Task { try await transport.send(Self.request("/held")) }
        try await transport.waitingAtGate(atLeast: 1)
        held.cancel()
        let error = await DepotError.from { _ = try await held.value }
        #expect(error?.code == .cancelled)
        #expect(transport.waitingAtGate.isEmpty)
        // The pass it did not use goes to the next request.
        transport.letThrough(1)
        #expect(await Self.status(transport, "/next") == 200)
    }

    @Test func theRecordOrdersRequestsAndAnswersOnOneCount() async throws {
        let transport = ScriptedTransport()
        transport.respond(to: "/slow", with: .status(202).gated)
        transport.respondToOtherPaths(with: .status(204))
        let slow = Task { await Self.status(transport, "/slow") }
        try await transport.waitingAtGate(atLeast: 1)
        #expect(await Self.status(transport, "/quick") == 204)
        transport.letThrough(1)
        #expect(await slow.value == 202)
        let exchanges = transport.exchanges
        #expect(exchanges.map(\.request.url.path) == ["/slow", "/quick"])
        #expect(exchanges.map(\.sentAt) == [0, 1] && exchanges.map(\.answeredAt) == [3, 2])
        #expect(exchanges.map(\.description) == ["GET /slow → 202", "GET /quick → 204"])
        #expect(transport.requests.map(\.url.path) == ["/slow", "/quick"])
    }

    @Test func aWaitThatIsNotMetFailsAndSaysWhatCame() async throws {
        let transport = ScriptedTransport(.status(200))
        _ = await Self.status(transport, "/only")
        let failure = await #expect(throws: Recorder<Void>.Failure.self) {
            try await transport.requests(atLeast: 2, timeout: .milliseconds(50))
        }
        #expect(failure?.description == "no 2 requests after 0.05 seconds; the transport got: GET /only → 200")
        #expect(try await transport.requests(atLeast: 1).map(\.url.path) == ["/only"])
    }

    @Test func forwardingRecordsARealTransportsAnswersAndShutsItDown() async throws {
        let inner = FixtureTransport(["/hello": .data(Data("hi".utf8))])
        let transport = ScriptedTransport(forwardingTo: inner)
        transport.respond(to: "/scripted", with: .status(418))
        #expect(await Self.status(transport, "/hello") == 200)
        #expect(await Self.status(transport, "/scripted") == 418)
        transport.isOffline = true
        #expect(await Self.status(transport, "/hello") == nil)
        #expect(inner.requests.map(\.url.path) == ["/hello"])
        #expect(transport.exchanges.map(\.status) == [200, 418, nil])
        await transport.shutdown()
    }

    /// Through a controller: the script's first answer fails the attempt, the
    /// retry waits at the gate, and the controller says the job runs.
    @Test func aControllersRetryWaitsAtTheGate() async throws {
        let transport = ScriptedTransport(.status(503, headers: ["Retry-After": "0"]), .status(200, body: Data(#"{"message":"hello"}"#.utf8)).gated)
        try await withController(transport, baseURL: URL(string: "http://script.test")!) { controller in
            let hello = Task { try await controller.perform(FetchHello(path: "/hello")) }
            try await transport.waitingAtGate(atLeast: 1)
            #expect(controller.activity.running == 1)
            #expect(transport.exchanges.map(\.status) == [503, nil])
            transport.letThrough(1)
            #expect(try await hello.value == Hello(message: "hello"))
        }
    }
}
