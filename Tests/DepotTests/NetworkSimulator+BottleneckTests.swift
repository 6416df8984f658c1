import Depot
import DepotTesting
import Foundation
import Testing

/// The simulator's bottleneck queue: bytes queued at the narrowest hop delay
/// every response behind them, as a router's buffer or `tbf` does.
@Suite struct NetworkSimulatorBottleneckTests {
    /// A 30 KB transfer at 0 and a 10 KB one at 100 ms on a 100 KB/s link with
    /// no round trip; the records by path.
    func run(queue: Int?) async throws -> [String: NetworkSimulator.Record] {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 800_000, rtt: .zero, queue: queue), routes: [
            .init(path: "/a", bytes: 30_000), .init(path: "/b", bytes: 10_000),
        ])
        let done = ServerBox(0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await NetworkSimulatorTests.fetch(simulator, "/a")
                done.withLock { $0 += 1 }
            }
            group.addTask {
                try await clock.sleep(until: .init(offset: .milliseconds(100)))
                try await NetworkSimulatorTests.fetch(simulator, "/b")
                done.withLock { $0 += 1 }
            }
            group.addTask {
                try await simulator.run(until: { done.withLock { $0 } == 2 }, settled: {
                    simulator.openTransferCount + clock.sleeperCount + done.withLock { $0 } == 2
                })
            }
            try await group.waitForAll()
        }
        return Dictionary(uniqueKeysWithValues: simulator.records.map { ($0.path, $0) })
    }

    func close(_ actual: Duration?, _ expected: Duration) -> Bool {
        guard let actual else { return false }
        return abs((actual - expected).inSeconds) < 0.000_1
    }

    @Test func withoutAQueueTransfersShareTheLinkAtOnce() async throws {
        let records = try await run(queue: nil)
        // From 100 ms each gets 50 KB/s: b's 10 KB take 200 ms
        #expect(close(records["/b"]?.firstByte, .milliseconds(100)))
        #expect(close(records["/b"]?.lastByte, .milliseconds(300)))
        #expect(close(records["/a"]?.lastByte, .milliseconds(400)))
    }

    @Test func aResponseWaitsBehindEveryQueuedByte() async throws {
        // Given a queue that holds all of a's 30 KB
        let records = try await run(queue: 1_000_000)
        // Then b's head waits for a's 20 KB still queued at 100 ms
        #expect(close(records["/a"]?.lastByte, .milliseconds(300)))
        #expect(close(records["/b"]?.firstByte, .milliseconds(300)))
        #expect(close(records["/b"]?.lastByte, .milliseconds(400)))
    }

    @Test func aSmallQueueDelaysByItsSizeThenSendersShare() async throws {
        // Given a 5 KB queue, full of a's bytes when b starts
        let records = try await run(queue: 5_000)
        // Then b's head waits 50 ms (5 KB), and b's bytes share the room with a's from 100 ms:
        // its 10 KB are in by 300 ms and out 50 ms later; the link never idles
        #expect(close(records["/b"]?.firstByte, .milliseconds(150)))
        #expect(close(records["/b"]?.lastByte, .milliseconds(350)))
        #expect(close(records["/a"]?.lastByte, .milliseconds(400)))
        #expect(records["/b"]?.bytes == 10_000)
        #expect(records["/a"]?.outcome == .completed)
    }
}

private extension Duration {
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
