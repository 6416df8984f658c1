import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// Status and events: snapshots, `OutboxStatus`, tickets, rolled-back
/// mutations and discards.
extension OutboxTests {
    /// Waits until a snapshot satisfies `condition` (values may be coalesced; the last one counts).
    static func firstSnapshot(of outbox: Outbox, where condition: (OutboxSnapshot) -> Bool) async -> OutboxSnapshot? {
        for await snapshot in outbox.updates() where condition(snapshot) { return snapshot }
        return nil
    }

    /// Yields the main actor until `condition` holds (or the test is cancelled):
    /// the status applies snapshots in tasks of its own there.
    @MainActor static func waitOnTheMainActor(until condition: @MainActor () -> Bool) async {
        while !condition(), !Task.isCancelled { await Task.yield() }
    }

    @Test func theStatusFollowsTheQueueAndEveryChangeIsAnEvent() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            let events = controller.events
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let status = await OutboxStatus(outbox: outbox)
            let first = try await outbox.send(SendPost("local-1", "one"))
            try await outbox.send(SendPost("local-2", "two"))
            let queued = await Self.firstSnapshot(of: outbox) { $0.pendingCount == 2 }
            #expect(queued?.failed.isEmpty == true)
            _ = await controller.shutdown(grace: .zero)  // the send waiting for the network ends; both stay queued
            try await first.cancel()
            #expect(await Self.firstSnapshot(of: outbox) { $0.pendingCount == 1 } != nil)
            // The main-actor status catches up with the last value (it has
            // been published; the status applies it on the main actor).
            await Self.waitOnTheMainActor(until: { status.pendingCount == 1 })
            #expect(await status.pendingCount == 1)
            #expect(await status.failed.isEmpty)
            // Each change was published as a controller-wide event.
            var counts: [Int] = []
            for await event in events where event.kind == .outboxChanged {
                #expect(event.isControllerWide)
                counts.append(event.outbox?.pending ?? -1)
            }
            #expect(counts.contains(2))
        }
    }

    /// Each entry's steps are controller events, in order; a ticket follows
    /// its own, and one decided already reports its final step at once.
    @Test func everyStepOfAnEntryIsAnEventAndTheTicketFollowsIt() async throws {
        try await withOnlineOutbox { _, _, controller, outbox in
            let events = controller.events
            let rejected = try await outbox.send(SendPost("local-1", ""))
            let accepted = try await outbox.send(SendPost("local-2", "fine"))
            var steps: [Int64: [String]] = [:]
            for await event in events {
                guard let change = event.outbox, let entry = change.entry, let step = change.step else { continue }
                steps[entry, default: []].append("\(step)")
                if steps[accepted.id.rawValue]?.last == "committed" { break }
            }
            #expect(steps[rejected.id.rawValue] == ["queued", "sending", "rolledBack"])
            #expect(steps[accepted.id.rawValue] == ["queued", "sending", "committed"])
            var followed: [NetworkEvent.OutboxChange.Step] = []
            for await change in accepted.changes() { followed.append(try #require(change.step)) }
            #expect(followed == [.committed])
            await #expect(throws: DepotError.self) { try await accepted.cancel() }
        }
    }

    /// A ticket taken before the send goes out sees it through to its end.
    @Test func aTicketFollowsItsEntryToTheEnd() async throws {
        try await withOnlineOutbox { _, _, controller, outbox in
            let blocker = try await outbox.send(SendPost("local-0", "first in the lane"))
            let ticket = try await outbox.send(SendPost("local-1", "second"))
            var followed: [NetworkEvent.OutboxChange.Step] = []
            for await change in ticket.changes() { followed.append(try #require(change.step)) }
            #expect(followed.last == .committed)
            #expect(Set(followed).isSubset(of: [.sending, .committed]))
            #expect(try await blocker.outcome().get().status == 201)
            _ = controller
        }
    }

    @Test func aRolledBackMutationIsListedWithItsError() async throws {
        try await withOnlineOutbox { _, _, _, outbox in
            let id = try await outbox.send(SendPost("local-1", ""))
            _ = await id.outcome()
            let snapshot = try await outbox.snapshot()
            let failure = try #require(snapshot.rolledBack.first { $0.id == id.id })
            #expect(failure.error.status == 422)
            #expect(failure.description.hasPrefix("SendPost.v1 was not accepted:"))
            #expect(snapshot.pendingCount == 0 && !snapshot.isSending)
        }
    }

    /// A queued entry that is not being sent can be discarded: its optimistic
    /// row is rolled back and its waiters hear `.cancelled`.
    @Test func discardRollsBackAQueuedEntry() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            _ = await controller.shutdown(grace: .zero)  // nothing is sent: the entry stays queued
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let id = try await outbox.send(SendPost("local-1", "never mind"))
            await outbox.waitUntilIdle()  // its one attempt met the shut-down controller
            let waiter = Task { await id.outcome() }
            try await id.cancel()
            guard case .failure(let error) = await waiter.value else {
                Issue.record("a discarded entry succeeded")
                return
            }
            #expect(error.code == .cancelled)
            #expect(try await Self.rows(store).isEmpty)
            #expect(try await outbox.entries().isEmpty)
            await #expect(throws: DepotError.self) { try await outbox.discard(id.id) }
        }
    }
}
