import Depot
import DepotStore
import DepotTesting
import Foundation
import Testing
import TimelineKit

/// The timing parts on a simulated link and a ManualClock: the timeline before
/// the avatars, avatars paused on EDGE and back when the link recovers, and a
/// post that survives quitting. No sleeps; the same result every run.
@MainActor
@Suite(.timeLimit(.minutes(2)))
struct SimulatedLinkTests {
    /// EDGE (120 kbit/s, 400 ms), thirty cached posts whose twelve avatars are
    /// not cached yet.
    @Test func timelineFirstThenAvatarsPausedOnEdge() async throws {
        let harness = try SimulatedTimeline(kbps: 120, rtt: .milliseconds(400), cached: cachedPosts)
        let app = try TimelineApp(controller: harness.controller)
        #expect(app.entries.fetchedObjects.count == 30, "the cache shows at once")
        try await harness.waitForWork()

        // The timeline arrives first; then the app asks for the avatars.
        let controller = harness.controller
        try await harness.run(until: { harness.entries("FetchTimeline").first?.finished != nil })
        try await harness.waitForEnqueued("FetchAvatar", count: 12)
        try await harness.run(until: { controller.quality == .poor })
        let timeline = try #require(harness.entries("FetchTimeline").first)
        #expect(timeline.outcome == .succeeded)
        let avatars = harness.entries("FetchAvatar")
        #expect(avatars.count == 12)
        let firstAvatarStart = try #require(avatars.compactMap(\.started).min())
        #expect(try #require(timeline.finished) <= firstAvatarStart)

        // On EDGE the quality drops to poor: one at a time, images paused.
        #expect(controller.connectionSnapshot.concurrencyLimit == 1)
        #expect(controller.pausedCategories.contains(.images))
        let pausedAt = harness.clock.elapsed
        // The monitor's defaults measure 20 KB avatars: 9.3 s (16 s with 16 KB samples).
        #expect(pausedAt < .seconds(10), "images paused at \(pausedAt)")
        #expect(try harness.cachedAvatars().count < 12, "some avatars were still waiting when images paused")

        // A post still goes out at once, ahead of the waiting avatars.
        try await app.post("hello")
        try await harness.run(until: { harness.entries("CreatePost").first?.finished != nil })
        let post = try #require(harness.entries("CreatePost").first)
        #expect(post.outcome == .succeeded)
        #expect(try #require(post.finished) - post.enqueued < .seconds(3), "a 20 KB avatar takes 1.3 s and the round trip 0.4 s")

        // A refresh while avatars wait goes ahead of them (priority, not only order).
        let queuedAvatars = Set(harness.entries("FetchAvatar").filter { $0.started == nil }.map(\.id))
        #expect(!queuedAvatars.isEmpty)
        let refreshing = Task { await app.refresh() }
        try await harness.run(until: { harness.entries("FetchTimeline").count == 2 && harness.entries("FetchTimeline")[1].finished != nil })
        await refreshing.value
        let refresh = try #require(harness.entries("FetchTimeline").last)
        #expect(refresh.id != timeline.id && refresh.outcome == .succeeded)
        let overtaken = harness.entries("FetchAvatar").filter { queuedAvatars.contains($0.id) && ($0.started ?? .seconds(1_000_000)) > refresh.started! }
        #expect(!overtaken.isEmpty, "the refresh started before avatars that were queued before it")

        // The paused avatars trickle out one at a time while nothing else waits,
        // and every one arrives, each fetched once.
        try await harness.run(until: { [store = harness.store] in
            (try? store.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM avatar") }) == 12
        })
        let late = harness.simulator.records.filter { $0.path.hasPrefix("/avatars/") && $0.started >= pausedAt }
        #expect(!late.isEmpty)
        for (earlier, later) in zip(late, late.dropFirst()) {
            #expect(try #require(earlier.ended) <= later.started, "one at a time: \(earlier) then \(later)")
        }
        #expect(harness.simulator.records.filter { $0.path.hasPrefix("/avatars/") }.count == 12, "no avatar was fetched twice")
        #expect(try app.entries.fetchedObjects.allSatisfy(\.hasAvatar) || { try app.entries.performFetch(); return app.entries.fetchedObjects.allSatisfy(\.hasAvatar) }())
    }

    /// Quitting while a post is in flight: the post (exit policy `.finish`)
    /// completes within the grace period; the avatars are cancelled.
    @Test func postSurvivesQuitWithinGrace() async throws {
        let harness = try SimulatedTimeline(kbps: 120, rtt: .milliseconds(400), postLatency: .seconds(3), cached: cachedPosts)
        let app = try TimelineApp(controller: harness.controller)
        try await harness.waitForWork()
        try await app.post("hello")
        let controller = harness.controller
        // The timeline is in, the avatars asked for, the post still in flight.
        try await harness.run(until: { harness.entries("FetchTimeline").first?.finished != nil })
        try await harness.waitForEnqueued("FetchAvatar", count: 12)
        #expect(app.sentPosts.first?.isQueued == true)

        let quitting = Task { @MainActor in await app.shutdown(grace: .seconds(10)) }
        // Drive the link, from the instant the quit has begun, until the controller
        // is done; the app then only waits for the completions it is owed on the main actor.
        try await harness.run(until: { controller.isShutDown && controller.activity.running + controller.activity.queued == 0 }, ready: { controller.isShutDown })
        let done = await quitting.value
        #expect(!done.graceExpired)
        #expect(done.finished >= 1)
        #expect(done.cancelled >= 10, "the avatars went at once: \(done)")
        let sent = try #require(app.sentPosts.first)
        guard case .sent(let post) = sent.state else {
            Issue.record("the post did not go out: \(sent.state)")
            return
        }
        #expect(post.id == 31)
        #expect(harness.clock.elapsed < .seconds(10), "it took the post's time, not the whole grace period")
        #expect(try harness.store.readSync { db in try TimelinePost.fetchOne(db, key: 31) }?.text == "hello")
    }

    /// When the grace period runs out, the post's attempt is cancelled and the
    /// post stays in the outbox, pending, for the next launch.
    @Test func graceRunningOutCancelsThePost() async throws {
        let harness = try SimulatedTimeline(kbps: 120, rtt: .milliseconds(400), postLatency: .seconds(30))
        let app = try TimelineApp(controller: harness.controller)
        try await harness.waitForWork()
        try await app.post("slow")
        let controller = harness.controller
        try await harness.run(until: { controller.activity.running >= 1 })

        let quitting = Task { @MainActor in await app.shutdown(grace: .seconds(5)) }
        // Drive the link, from the instant the quit has begun, until the controller
        // is done; the app then only waits for the completions it is owed on the main actor.
        try await harness.run(until: { controller.isShutDown && controller.activity.running + controller.activity.queued == 0 }, ready: { controller.isShutDown })
        let done = await quitting.value
        #expect(done.graceExpired)
        #expect(try #require(app.sentPosts.first).isQueued)
        #expect(try await app.outbox.entries().map(\.typeName) == ["CreatePost"])
        #expect(try harness.store.readSync { db in try PendingPost.fetchAll(db) }.map(\.text) == ["slow"])
    }
}
