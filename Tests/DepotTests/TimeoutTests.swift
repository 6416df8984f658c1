import Depot
import DepotTesting
import Foundation
import Testing

/// The total deadline: a server that drips its body (one byte a second,
/// never idle long enough for the idle timeout) is cut off when the total
/// runs out, on the manual clock, through the simulator.
struct TimeoutTests {
    struct Feed: NetworkOperation {
        typealias Output = NetworkResponse
        var request: NetworkRequest { .get("feed") }
    }

    @Test(arguments: [
        (nil, .seconds(300)),           // the library's default total
        (.seconds(60), .seconds(60)),   // a one-shot tool's cap
    ] as [(Duration?, Duration)])
    func aDrippingBodyEndsAtTheTotalDeadline(cap: Duration?, expected: Duration) async throws {
        let clock = ManualClock()
        // 700 bytes at 8 bit/s in 1-byte chunks: a byte every second, for 700 s.
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 8, rtt: .zero), routes: [.init(path: "/feed", bytes: 700)], chunkSize: 1)
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://drip.test")!, transport: simulator, observability: .init(notificationCenter: nil), environment: .init(clock: clock))
        configuration.retries.policy = RetryPolicy(maximumAttempts: 1)
        configuration.limits.longestTransfer = cap
        let controller = NetworkController(configuration: configuration)
        let outcome = Task { () -> DepotError? in
            do throws(DepotError) {
                _ = try await controller.perform(Feed())
                return nil
            } catch {
                return error
            }
        }
        try await simulator.run(until: { simulator.records.first?.ended != nil }, settled: simulator.settled(with: controller))
        let found = await outcome.value
        let error = try #require(found, "the dripping body was allowed to finish")
        #expect(error.code == .timedOut)
        #expect("\(error)".contains("\(expected) in total"), "\(error)")
        let ended = try #require(simulator.records.first?.ended)
        #expect(ended >= expected && ended < expected + .seconds(2), "cut off at \(ended)")
        #expect((simulator.records.first?.bytes ?? 0) < 700)
        _ = await controller.shutdown(grace: .zero)
    }
}
