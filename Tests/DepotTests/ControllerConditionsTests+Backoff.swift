import Depot
import DepotTesting
import Foundation
import Testing

/// An urgent job that sleeps before its retry, and the delayable work around
/// it: a long sleep lends the link, a short one does not, and the lending
/// stops a margin before the retry.
extension ControllerConditionsTests {
    /// An urgent job sleeping out a `Retry-After` sends nothing: delayable
    /// work, ranged or whole, runs meanwhile instead of waiting out the backoff.
    @Test(arguments: [true, false]) func anUrgentJobInBackoffHoldsNoDelayableWorkBack(ranged: Bool) async throws {
        let harness = Harness(
            link: .init(bandwidth: 1_000_000, rtt: .milliseconds(100)),
            routes: [
                NetworkSimulator.Route(path: "/urgent", bytes: 1_000).failing(1, with: .status(503, headers: ["Retry-After": "30"])),
                .init(path: "/image/*", bytes: 40_000, headers: ranged ? ["ETag": "\"i\""] : [:]),
            ])
        let urgent = harness.controller.enqueue(SimGet(path: "urgent", priority: .high))
        let images = (0..<3).map { harness.controller.enqueue(SimGet(path: "image/\($0)", priority: .low, category: .images)) }

        try await harness.run(until: { images.allSatisfy(\.isFinished) })

        // The images came while the urgent job slept, well before its retry at 30 s
        #expect(!urgent.isFinished)
        #expect(images.allSatisfy { harness.entry($0)?.outcome == .succeeded && (harness.entry($0)?.finished ?? .zero) < .seconds(5) })
        try await harness.run(until: { urgent.isFinished })
        #expect(harness.entry(urgent)?.outcome == .succeeded)
        #expect(harness.simulator.records.filter { $0.path == "/urgent" }.count == 2)
    }

    /// A retry that hardly sleeps, and how long its 40 KB may take at 1 Mbit/s.
    struct ShortSleep: Sendable, CustomTestStringConvertible {
        var retryAfter: String?
        var imageBytes: Int
        var within: Duration
        var testDescription: String { retryAfter.map { "Retry-After: \($0)" } ?? "the default jittered backoff" }
    }

    /// Found by review: a retry that hardly sleeps (`Retry-After: 0`, every
    /// retry after a token refresh, the default jittered backoff) lent the
    /// link too, and the image the scheduler started in that instant sat
    /// ahead of the retry's bytes: 320 ms became 698 ms, and after the
    /// jittered backoff (up to 500 ms here) 0.69 s became 1.04 s.
    @Test(arguments: [
        ShortSleep(retryAfter: "0", imageBytes: 60_000, within: .milliseconds(400)),
        ShortSleep(retryAfter: nil, imageBytes: 90_000, within: .milliseconds(750)),
    ])
    func anUrgentRetryAfterAShortSleepIsNotQueuedBehindDelayableBytes(_ sleep: ShortSleep) async throws {
        let harness = Harness(
            link: .init(bandwidth: 1_000_000, rtt: .milliseconds(1), queue: 94_000),
            routes: [
                NetworkSimulator.Route(path: "/urgent", bytes: 40_000).failing(1, with: .status(503, headers: sleep.retryAfter.map { ["Retry-After": $0] } ?? [:])),
                .init(path: "/image/*", bytes: sleep.imageBytes),
            ])
        let urgent = harness.controller.enqueue(SimGet(path: "urgent", priority: .high))
        let images = (0..<5).map { harness.controller.enqueue(SimGet(path: "image/\($0)", priority: .low, category: .images)) }
        try await harness.run(until: { urgent.isFinished })
        let entry = try #require(harness.entry(urgent))
        let took = try #require(entry.finished) - entry.enqueued
        #expect(took <= sleep.within, "the urgent retry took \(took)")
        try await harness.run(until: { images.allSatisfy(\.isFinished) })
    }

    /// During a 10 s `Retry-After` images come back to back (60 KB, whole);
    /// a second before the retry no new one starts, so the link is idle when
    /// the retry goes out and it takes its physical minimum, 320 ms (421 ms
    /// when the lending lasted to the retry).
    @Test func delayableWorkStopsStartingAMarginBeforeTheRetry() async throws {
        let harness = Harness(
            link: .init(bandwidth: 1_000_000, rtt: .milliseconds(1), queue: 94_000),
            routes: [
                NetworkSimulator.Route(path: "/urgent", bytes: 40_000).failing(1, with: .status(503, headers: ["Retry-After": "10"])),
                .init(path: "/image/*", bytes: 60_000),
            ])
        let urgent = harness.controller.enqueue(SimGet(path: "urgent", priority: .high))
        let images = (0..<60).map { harness.controller.enqueue(SimGet(path: "image/\($0)", priority: .low, category: .images)) }
        try await harness.run(until: { urgent.isFinished })

        let retry = try #require(harness.simulator.records.last { $0.path == "/urgent" })
        let finished = try #require(harness.entry(urgent)?.finished)
        #expect(finished - retry.started <= .milliseconds(330), "the retry took \(finished - retry.started)")
        // And the link was lent meanwhile: images finished during the sleep
        #expect(images.filter { ($0.isFinished) }.count >= 10)
        try await harness.run(until: { images.allSatisfy(\.isFinished) })
    }
}
