import AsyncHTTPClient
@testable import DemoServer
import DepotTesting
import Foundation
import NIOCore
import Testing

/// Latency, bandwidth, fail rate and offline windows, global and per route.
@Suite(.timeLimit(.minutes(1))) struct NetworkConditionsTests {
    func get(_ url: URL) async throws -> NerdfeedRoutesTests.Fetched {
        try await NerdfeedRoutesTests().get(url)
    }

    func control(_ server: DemoServer, _ json: String) async throws -> Int {
        var request = HTTPClientRequest(url: server.baseURL.absoluteString + "/_control")
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: json))
        let response = try await NerdfeedRoutesTests.client.execute(request, timeout: .seconds(10))
        _ = try await response.body.collect(upTo: 1 << 16)
        return Int(response.status.code)
    }

    @Test func pacingArithmetic() {
        // 200 KB at 400 kbps is 4 s, sent as 50 ms chunks of 2,500 bytes.
        let plan = PacingPlan(bytes: 200_000, kbps: 400)
        #expect(plan.chunks.count == 80)
        #expect(Set(plan.chunks) == [2500])
        #expect(plan.duration == .seconds(4))
        // A tail shorter than a chunk takes proportionally less time.
        let tail = PacingPlan(bytes: 2600, kbps: 400)
        #expect(tail.chunks == [2500, 100])
        #expect(tail.duration == .milliseconds(52))
        #expect(PacingPlan(bytes: 0, kbps: 400).chunks.isEmpty)
    }

    @Test func latencyDelaysTheAnswerOnTheServerClock() async throws {
        let clock = ManualClock()
        try await DemoServer.withRunning(.init(clock: clock, conditions: .init(latencyMs: 300))) { server in
            let download = Task { try await get(server.url(for: .empty)) }
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .milliseconds(299))
            #expect(clock.sleeperCount == 1)  // still waiting
            clock.advance(by: .milliseconds(1))
            let response = try await download.value
            #expect(response.status == 200)
        }
    }

    @Test func bandwidthPacesTheBody() async throws {
        let clock = ManualClock()
        try await DemoServer.withRunning(.init(clock: clock)) { server in
            let plain = try await get(server.url(for: .bytes(10_000)))
            let value1 = try await control(server, #"{"bandwidthKbps": 80}"#)
            #expect(value1 == 200)
            let plan = PacingPlan(bytes: 10_000, kbps: 80)  // 10 KB/s: 20 chunks of 500 bytes, 1 s
            let download = Task { try await get(server.url(for: .bytes(10_000))) }
            for _ in plan.chunks {
                await clock.sleepers(atLeast: 1)
                clock.advance(by: .milliseconds(50))
            }
            let paced = try await download.value
            #expect(paced.body == plain.body)
            #expect(clock.elapsed == .seconds(1))
        }
    }

    /// Two downloads at once share the link: 2 × 10 KB at 10 KB/s end at 2 s,
    /// each 50 ms chunk in a slot of its own, not both at 1 s.
    @Test func concurrentBodiesShareTheLink() async throws {
        let clock = ManualClock()
        try await DemoServer.withRunning(.init(clock: clock)) { server in
            let set = try await control(server, #"{"bandwidthKbps": 80}"#)
            #expect(set == 200)
            let first = Task { try await get(server.url(for: .bytes(10_000))) }
            let second = Task { try await get(server.url(for: .bytes(10_000))) }
            var deadlines: [Duration] = []
            for round in 0..<40 {
                // Both downloads book their first chunk before time moves: otherwise a
                // late second request would start its slots 50 ms later.
                await clock.sleepers(atLeast: round == 0 ? 2 : 1)
                if let deadline = clock.advanceToNextDeadline() { deadlines.append(deadline.offset) }
            }
            let bodies = (try await first.value.body, try await second.value.body)
            #expect(bodies.0.utf8.count == 10_000 && bodies.1.utf8.count == 10_000)
            #expect(deadlines.last == .seconds(2))
            #expect(Set(deadlines).count == 40, "every chunk had a slot of its own")
        }
    }

    @Test func failRatePerRoute() async throws {
        try await DemoServer.withRunning { server in
            let value2 = try await control(server, #"{"route": "/forum/rss", "failRate": 1}"#)
            #expect(value2 == 200)
            for _ in 0..<5 {
                let status = try await get(server.baseURL.appendingPathComponent("forum/rss")).status
                #expect(status == 503)
            }
            let value3 = try await get(server.baseURL.appendingPathComponent("forum/atom")).status
            #expect(value3 == 200)
            let value4 = try await control(server, #"{"reset": true}"#)
            #expect(value4 == 200)
            let value5 = try await get(server.baseURL.appendingPathComponent("forum/rss")).status
            #expect(value5 == 200)
        }
    }

    @Test func failRateIsAFraction() async throws {
        try await DemoServer.withRunning(.init(seed: 9, conditions: .init(failRate: 0.5))) { server in
            var failures = 0
            for _ in 0..<200 {
                let status = try await get(server.url(for: .empty)).status
                if status == 503 { failures += 1 }
            }
            #expect((60...140).contains(failures), "\(failures) of 200")
        }
    }

    @Test func offlineWindowClosesConnectionsUntilLifted() async throws {
        try await DemoServer.withRunning { server in
            let value6 = try await control(server, #"{"offline": true}"#)
            #expect(value6 == 200)
            await #expect(throws: (any Error).self) { _ = try await get(server.url(for: .empty)) }
            let value7 = try await control(server, #"{"offline": false}"#)
            #expect(value7 == 200)
            let value8 = try await get(server.url(for: .empty)).status
            #expect(value8 == 200)
        }
    }

    @Test func resetReturnsToTheStartConditionsThenApplies() async throws {
        try await DemoServer.withRunning(.init(conditions: .init(latencyMs: 200))) { server in
            let set = try await control(server, #"{"route": "/forum/rss", "failRate": 1}"#)
            let reset = try await control(server, #"{"reset": true, "latencyMs": 0}"#)
            #expect(set == 200 && reset == 200)
            #expect(server.currentConditions(for: "/forum/rss") == NetworkConditions(latencyMs: 0))
        }
    }

    /// A dropped response: the handler runs (the effect happens), then the
    /// connection closes without an answer; the next request is answered.
    @Test func droppedResponsesAreHandledThenCut() async throws {
        try await DemoServer.withRunning { server in
            let set = try await control(server, #"{"route": "/forum/rss", "dropResponses": 1}"#)
            #expect(set == 200)
            await #expect(throws: (any Error).self) { _ = try await get(server.baseURL.appending(path: "forum/rss")) }
            let next = try await get(server.baseURL.appending(path: "forum/rss")).status
            let other = try await get(server.url(for: .empty)).status
            #expect(next == 200)
            #expect(other == 200, "other routes were never affected")
            let negative = try await control(server, #"{"dropResponses": -1}"#)
            #expect(negative == 422)
        }
    }

    @Test func controlRejectsBadInput() async throws {
        try await DemoServer.withRunning { server in
            let value9 = try await control(server, "not json")
            #expect(value9 == 422)
            let value10 = try await control(server, #"{"failRate": 2}"#)
            #expect(value10 == 422)
            let huge = try await control(server, #"{"bandwidthKbps": 99999999999999}"#)
            let negative = try await control(server, #"{"latencyMs": -1}"#)
            #expect(huge == 422 && negative == 422)
        }
    }

    /// The real-time check: 200 KB at 400 kbps takes about 4 s. Slow, so it runs
    /// only when asked: `DEPOT_SLOW_TESTS=1 swift test --filter realTimePacing`.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["DEPOT_SLOW_TESTS"] != nil))
    func realTimePacing() async throws {
        try await DemoServer.withRunning(.init(conditions: .init(bandwidthKbps: 400))) { server in
            let start = ContinuousClock.now
            let response = try await get(server.url(for: .bytes(200_000)))
            let elapsed = ContinuousClock.now - start
            #expect(response.body.utf8.count == 200_000)
            #expect(elapsed > .milliseconds(3800) && elapsed < .seconds(10), "\(elapsed)")
        }
    }
}
