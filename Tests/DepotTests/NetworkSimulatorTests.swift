import Depot
import DepotTesting
import Foundation
import Synchronization
import Testing

@Suite struct NetworkSimulatorTests {
    static let base = URL(string: "http://sim.test")!

    func request(_ path: String, _ method: NetworkRequest.Method = .get) -> TransportRequest {
        TransportRequest(url: Self.base.appending(path: path), method: method)
    }

    /// Sends and reads to the end; returns the status and the body size.
    @discardableResult
    static func fetch(_ simulator: NetworkSimulator, _ path: String) async throws -> (Int, Int) {
        let response = try await simulator.send(TransportRequest(url: base.appending(path: path)))
        var count = 0
        for try await chunk in response.body { count += chunk.count }
        return (response.status, count)
    }

    /// Counts the workers that still have work, so the driver knows when all are parked.
    final class Pool: Sendable {
        private struct State { var next = 0; var busy: Int }
        private let state: Mutex<State>
        let count: Int

        init(items: Int, workers: Int) {
            count = items
            state = Mutex(State(busy: workers))
        }

        /// The next item, or nil (and this worker is no longer busy) when none is left.
        func take() -> Int? {
            state.withLock { state in
                guard state.next < count else {
                    state.busy -= 1
                    return nil
                }
                state.next += 1
                return state.next
            }
        }

        var busy: Int { state.withLock { $0.busy } }
    }

    /// Runs `items` fetches of `path(i)` with `workers` workers, driving the simulator to the end.
    static func runPool(_ simulator: NetworkSimulator, items: Int, workers: Int, path: @escaping @Sendable (Int) -> String) async throws {
        let pool = Pool(items: items, workers: workers)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    while let item = pool.take() {
                        do { try await fetch(simulator, path(item)) } catch {}
                    }
                }
            }
            group.addTask {
                try await simulator.run(until: { pool.busy == 0 }, settled: { pool.busy == simulator.openTransferCount })
            }
            try await group.waitForAll()
        }
    }

    // MARK: Physics

    @Test func oneTransferTakesRoundTripPlusBytesOverBandwidth() async throws {
        // Given 40 KB alone on 1 Mbit/s with a 100 ms round trip and 20 ms server latency
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .milliseconds(100)), routes: [.init(path: "/a", bytes: 40_000, latency: .milliseconds(20))])
        // When it is fetched
        try await Self.runPool(simulator, items: 1, workers: 1) { _ in "/a" }
        // Then the head arrives after 120 ms and the body 320 ms later
        let record = try #require(simulator.records.first)
        #expect(record.firstByte == .milliseconds(120))
        #expect(record.lastByte == .milliseconds(440))
        #expect(record.ended == .milliseconds(440))
        #expect(record.bytes == 40_000)
        #expect(record.outcome == .completed)
        #expect(record.status == 200)
    }

    @Test func twoConcurrentTransfersShareTheLinkFairly() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .milliseconds(100)), routes: [.init(path: "/x/*", bytes: 40_000)])
        try await Self.runPool(simulator, items: 2, workers: 2) { "/x/\($0)" }
        // Each gets 500 kbit/s: 640 ms of body after the 100 ms head.
        for record in simulator.records {
            #expect(record.lastByte == .milliseconds(740))
        }
        #expect(simulator.records.count == 2)
    }

    @Test func aFinishedTransferGivesItsShareBack() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 800_000, rtt: .zero), routes: [
            .init(path: "/small", bytes: 10_000), .init(path: "/big", bytes: 30_000),
        ])
        try await Self.runPool(simulator, items: 2, workers: 2) { $0 == 1 ? "/small" : "/big" }
        let byPath = Dictionary(uniqueKeysWithValues: simulator.records.map { ($0.path, $0) })
        // 100 kB/s shared: small ends at 10 kB / 50 kB/s = 200 ms; big has 20 kB left, alone at 100 kB/s: 200 ms more.
        #expect(byPath["/small"]?.lastByte == .milliseconds(200))
        #expect(byPath["/big"]?.lastByte == .milliseconds(400))
    }

    @Test func bodiesArriveInChunks() async throws {
        let clock = ManualClock()
        let body = Data((0..<40_000).map { UInt8($0 % 251) })
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 8_000_000, rtt: .milliseconds(10)), routes: [.init(path: "/b", body: body)], chunkSize: 16_384)
        let sizes = ServerBox<[Int]>([])
        let received = ServerBox(Data())
        let done = ServerBox(false)
        async let run: Void = simulator.run(until: { done.withLock { $0 } }, settled: { done.withLock { $0 } || simulator.openTransferCount == 1 })
        let response = try await simulator.send(request("/b"))
        for try await chunk in response.body {
            sizes.withLock { $0.append(chunk.count) }
            received.withLock { $0.append(chunk) }
        }
        done.withLock { $0 = true }
        try await run
        #expect(sizes.withLock { $0 } == [16_384, 16_384, 7_232])
        #expect(received.withLock { $0 } == body)
        #expect(response.expectedLength == 40_000)
    }

    @Test func unknownPathsAnswer404() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .milliseconds(50)), routes: [])
        try await Self.runPool(simulator, items: 1, workers: 1) { _ in "/nothing" }
        #expect(simulator.records.first?.status == 404)
        #expect(simulator.records.first?.firstByte == .milliseconds(50))
    }

    /// A route with an ETag answers 304 with no body to an `If-None-Match`
    /// that names it (weakly, or `*`), and 200 otherwise.
    @Test func aMatchingIfNoneMatchGets304() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(
            clock: clock, link: .init(bandwidth: 8_000_000, rtt: .milliseconds(10)),
            routes: [.init(path: "/feed", bytes: 4_000, headers: ["ETag": "\"v1\""]), .init(path: "/plain", bytes: 100)])
        final class Outcomes: Sendable {
            let seen = Mutex<[String: (status: Int, bytes: Int)]>([:])
            var count: Int { seen.withLock { $0.count } }
        }
        let outcomes = Outcomes()
        let cases: [(String, String, String?)] = [
            ("none", "/feed", nil), ("same", "/feed", "\"v1\""), ("weak", "/feed", "W/\"v1\""),
            ("listed", "/feed", "\"v0\", \"v1\""), ("any", "/feed", "*"), ("other", "/feed", "\"v2\""),
            ("no etag", "/plain", "*"),
        ]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (name, path, tag) in cases {
                group.addTask {
                    var request = TransportRequest(url: Self.base.appending(path: path))
                    if let tag { request.headers["If-None-Match"] = tag }
                    let response = try await simulator.send(request)
                    var count = 0
                    for try await chunk in response.body { count += chunk.count }
                    outcomes.seen.withLock { $0[name] = (response.status, count) }
                }
            }
            group.addTask {
                try await simulator.run(until: { outcomes.count == cases.count }, settled: { cases.count - outcomes.count == simulator.openTransferCount })
            }
            try await group.waitForAll()
        }
        let seen = outcomes.seen.withLock { $0 }
        for name in ["same", "weak", "listed", "any"] {
            #expect(seen[name]?.status == 304 && seen[name]?.bytes == 0, "\(name): \(String(describing: seen[name]))")
        }
        #expect(seen["none"]?.status == 200 && seen["none"]?.bytes == 4_000)
        #expect(seen["other"]?.status == 200 && seen["other"]?.bytes == 4_000)
        #expect(seen["no etag"]?.status == 200 && seen["no etag"]?.bytes == 100)
    }

    /// A route with a strong ETag answers `Range: bytes=a-b` with 206 and
    /// those bytes, unless `If-Range` names another tag; others answer whole.
    @Test func aRouteWithAStrongETagAnswersByteRanges() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(
            clock: clock, link: .init(bandwidth: 8_000_000, rtt: .milliseconds(10)),
            routes: [.init(path: "/image", bytes: 4_000, headers: ["ETag": "\"v1\""]), .init(path: "/weak", bytes: 4_000, headers: ["ETag": "W/\"v1\""])])
        let cases: [(path: String, range: String, ifRange: String?, status: Int, bytes: Int, contentRange: String?)] = [
            ("/image", "bytes=0-999", nil, 206, 1_000, "bytes 0-999/4000"),
            ("/image", "bytes=3000-9999", "\"v1\"", 206, 1_000, "bytes 3000-3999/4000"),
            ("/image", "bytes=1000-1999", "\"v0\"", 200, 4_000, nil),
            ("/image", "bytes=5000-5999", nil, 200, 4_000, nil),
            ("/weak", "bytes=0-999", nil, 200, 4_000, nil),
        ]
        for item in cases {
            var request = TransportRequest(url: Self.base.appending(path: item.path))
            request.headers["Range"] = item.range
            if let tag = item.ifRange { request.headers["If-Range"] = tag }
            let outcome = ServerBox<(status: Int, bytes: Int, contentRange: String?)?>(nil)
            let done: @Sendable () -> Bool = { outcome.withLock { $0 != nil } }
            async let run: Void = simulator.run(until: done, settled: { done() || simulator.openTransferCount == 1 })
            let response = try await simulator.send(request)
            var count = 0
            for try await chunk in response.body { count += chunk.count }
            outcome.withLock { $0 = (response.status, count, response.headers["Content-Range"]) }
            try await run
            let seen = try #require(outcome.withLock { $0 })
            #expect(seen.status == item.status && seen.bytes == item.bytes && seen.contentRange == item.contentRange, "\(item.range) \(item.ifRange ?? "")")
        }
    }

    // MARK: Timeline

    @Test func bandwidthChangesMidTransfer() async throws {
        // 100 kB at 8 Mbit/s (1 MB/s) for 50 ms, then 800 kbit/s (100 kB/s).
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 8_000_000, rtt: .zero), routes: [.init(path: "/a", bytes: 100_000)], timeline: [.bandwidth(800_000, at: .milliseconds(50))])
        try await Self.runPool(simulator, items: 1, workers: 1) { _ in "/a" }
        // 50 kB in the first 50 ms, the other 50 kB in 500 ms.
        #expect(simulator.records.first?.lastByte == .milliseconds(550))
    }

    @Test func offlineRefusesNewTransfersAndBreaksOpenOnes() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 800_000, rtt: .zero), routes: [.init(path: "/a", bytes: 100_000)], timeline: NetworkSimulator.Change.offline(from: .milliseconds(100), until: .seconds(1)))
        let outcome = ServerBox<[String]>([])
        let busy = ServerBox(1)
        async let run: Void = simulator.run(until: .seconds(2), settled: { busy.withLock { $0 } == simulator.openTransferCount })
        do {
            try await Self.fetch(simulator, "/a")
        } catch let error as DepotError {
            outcome.withLock { $0.append("\(error.code)") }
        }
        do {
            try await Self.fetch(simulator, "/a")
        } catch let error as DepotError {
            outcome.withLock { $0.append("\(error.code)") }
        }
        busy.withLock { $0 = 0 }
        try await run
        #expect(outcome.withLock { $0 } == ["connectionLost", "offline"])
        let records = simulator.records
        #expect(records.map(\.outcome) == [.failed(.connectionLost), .failed(.offline)])
        #expect(records[0].ended == .milliseconds(100))
        #expect(records[0].bytes == 0)  // 10 kB had arrived, less than one chunk
        #expect(clock.elapsed == .seconds(2))
    }

    @Test func scriptedFailuresComeFirst() async throws {
        let clock = ManualClock()
        let route = NetworkSimulator.Route(path: "/a", bytes: 1_000).failing(2, with: .status(503, headers: ["Retry-After": "1"]))
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .milliseconds(10)), routes: [route])
        let statuses = ServerBox<[Int]>([])
        let retryAfter = ServerBox<[String?]>([])
        let busy = ServerBox(1)
        async let run: Void = simulator.run(until: { busy.withLock { $0 } == 0 }, settled: { busy.withLock { $0 } == simulator.openTransferCount })
        for _ in 0..<3 {
            let response = try await simulator.send(request("/a"))
            statuses.withLock { $0.append(response.status) }
            retryAfter.withLock { $0.append(response.headers["Retry-After"]) }
            for try await _ in response.body {}
        }
        busy.withLock { $0 = 0 }
        try await run
        #expect(statuses.withLock { $0 } == [503, 503, 200])
        #expect(retryAfter.withLock { $0 } == ["1", "1", nil])
    }

    @Test func connectionLostAfterSomeBytes() async throws {
        let clock = ManualClock()
        let route = NetworkSimulator.Route(path: "/a", bytes: 50_000).failing(1, with: .connectionLost(afterBytes: 20_000))
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 8_000_000, rtt: .zero), routes: [route], chunkSize: 10_000)
        let busy = ServerBox(1)
        async let run: Void = simulator.run(until: { busy.withLock { $0 } == 0 }, settled: { busy.withLock { $0 } == simulator.openTransferCount })
        let error = await #expect(throws: DepotError.self) { try await Self.fetch(simulator, "/a") }
        busy.withLock { $0 = 0 }
        try await run
        #expect(error?.code == .connectionLost)
        #expect(simulator.records.first?.bytes == 20_000)
    }

    // MARK: Cancellation

    @Test func droppingTheBodyFreesTheShare() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 800_000, rtt: .zero), routes: [.init(path: "/a", bytes: 20_000), .init(path: "/b", bytes: 100_000)], chunkSize: 10_000)
        let busy = ServerBox(2)
        async let run: Void = simulator.run(until: { busy.withLock { $0 } == 0 }, settled: { busy.withLock { $0 } == simulator.openTransferCount })
        async let other: Void = {
            try await Self.fetch(simulator, "/a")
            busy.withLock { $0 -= 1 }
        }()
        // Read one chunk of /b, then drop the body.
        do {
            let response = try await simulator.send(request("/b"))
            var iterator = response.body.makeAsyncIterator()
            _ = try await iterator.next()
        }
        busy.withLock { $0 -= 1 }
        try await other
        try await run
        let byPath = Dictionary(uniqueKeysWithValues: simulator.records.map { ($0.path, $0) })
        // Both at 50 kB/s until /b's first chunk (10 kB) at 200 ms; then /a has 10 kB left, alone: 100 ms.
        #expect(byPath["/b"]?.outcome == .cancelled)
        #expect(byPath["/b"]?.ended == .milliseconds(200))
        #expect(byPath["/a"]?.lastByte == .milliseconds(300))
        #expect(simulator.openTransferCount == 0)
    }

    @Test func cancellingTheTaskEndsTheTransfer() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .seconds(1)), routes: [.init(path: "/a", bytes: 1_000)])
        let executor = SuspensionExecutor()
        let task = Task(executorPreference: executor) { try await Self.fetch(simulator, "/a") }
        await executor.suspended()  // the fetch waits on the link for the head: its transfer is open
        #expect(simulator.openTransferCount == 1)
        task.cancel()
        let result = await task.result
        #expect(throws: DepotError.self) { try result.get() }
        #expect(simulator.records.first?.outcome == .cancelled)
        #expect(simulator.openTransferCount == 0)
    }

    // MARK: Determinism

    static func scenario() async throws -> [String] {
        let clock = ManualClock()
        let routes: [NetworkSimulator.Route] = [
            .init(path: "/img/*", bytes: 48_000, latency: .milliseconds(30)),
            .init(path: "/json/*", bytes: 3_000, latency: .milliseconds(80)),
            .init(path: "/big/*", bytes: 400_000, latency: .milliseconds(10)),
        ]
        let simulator = NetworkSimulator(
            clock: clock,
            link: .init(bandwidth: 20_000_000, rtt: .milliseconds(40)),
            routes: routes,
            timeline: [.bandwidth(100_000, at: .seconds(1)), .rtt(.milliseconds(300), at: .seconds(1)), .bandwidth(20_000_000, at: .seconds(20))]
        )
        let kinds = ["img", "json", "big"]
        try await runPool(simulator, items: 30, workers: 4) { "/\(kinds[$0 % 3])/\($0)" }
        return simulator.records.sorted { $0.path < $1.path }.map { record in
            var copy = record
            copy.id = 0
            return copy.description
        }
    }

    @Test func sameScenarioSameResultTenTimes() async throws {
        let first = try await Self.scenario()
        #expect(first.count == 30)
        if ProcessInfo.processInfo.environment["DEPOT_PRINT"] != nil { print(first.joined(separator: "\n")) }
        for _ in 0..<9 {
            let again = try await Self.scenario()
            #expect(again == first)
        }
    }

    @Test func realClocksAreSelfTimed() async throws {
        let simulator = NetworkSimulator(clock: ContinuousClock(), link: .init(bandwidth: 80_000_000, rtt: .milliseconds(5)), routes: [.init(path: "/a", bytes: 50_000)])
        let start = ContinuousClock.now
        let (status, bytes) = try await Self.fetch(simulator, "/a")
        #expect(status == 200)
        #expect(bytes == 50_000)
        // At least the round trip plus 5 ms of body; no upper bound, machines vary.
        #expect(ContinuousClock.now - start >= .milliseconds(10))
        #expect(simulator.records.first?.outcome == .completed)
    }
}
