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
    /// A controller on a manual clock whose transport finds no network until
    /// the test sets `isOffline` to false; then `path` answers 201 with `body`.
    static func offlineUntilTold(answering path: String, with body: Data, store: Store) -> (FixtureTransport, ManualClock, NetworkController) {
        let transport = FixtureTransport([path: .data(body, status: 201)])
        transport.isOffline = true
        let clock = ManualClock()
        let controller = NetworkController(
            configuration: .init(baseURL: URL(string: "http://offline.test")!, transport: transport, observability: .init(notificationCenter: nil), environment: .init(clock: clock)),
            store: store)
        return (transport, clock, controller)
    }

    /// Waits until a snapshot satisfies `condition` (values may be coalesced; the last one counts).
    static func firstSnapshot(of outbox: Outbox, where condition: (OutboxSnapshot) -> Bool) async -> OutboxSnapshot? {
        for await snapshot in outbox.updates() where condition(snapshot) { return snapshot }
        return nil
    }

    @Test func theStatusFollowsTheQueueAndEveryChangeIsAnEvent() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let changes = outbox.changes()
            let status = await OutboxStatus(outbox: outbox)
            let first = try await outbox.send(SendPost("local-1", "one"))
            try await outbox.send(SendPost("local-2", "two"))
            let queued = await Self.firstSnapshot(of: outbox) { $0.pendingCount == 2 }
            #expect(queued?.failed.isEmpty == true)
            _ = await controller.shutdown(grace: .zero)  // the send waiting for the network ends; both stay queued
            await outbox.waitUntilIdle()                  // and its lane has let go of it
            try await first.cancel()
            #expect(await Self.firstSnapshot(of: outbox) { $0.pendingCount == 1 } != nil)
            // The main-actor status catches up with the last value (it has
            // been published; the status applies it on the main actor).
            try await observed { status.pendingCount == 1 }
            #expect(await status.pendingCount == 1)
            #expect(await status.failed.isEmpty)
            // Each change was published, until the controller shut down.
            var counts: [Int] = []
            for await change in changes { counts.append(change.pending) }
            #expect(counts.contains(2))
        }
    }

    /// While the network is gone an entry's attempt waits for it: its step is
    /// `waitingForNetwork` and the snapshot says so rather than "sending".
    /// When the network is back it goes out (`sending`) and commits.
    @Test func anEntryWaitingForTheNetworkSaysSoAndIsNotSending() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let (transport, clock, controller) = Self.offlineUntilTold(answering: "/tasks", with: Data("{}".utf8), store: store)
            let outbox = Outbox(store: store, controller: controller, types: [CreateTask.self])
            let changes = outbox.changes()
            let ticket = try await outbox.send(CreateTask(payload: "Call Ann"))

            // While offline: waiting for the network, not sending
            let waiting = await Self.firstSnapshot(of: outbox) { $0.isWaitingForNetwork }
            #expect(waiting?.isSending == false && waiting?.pendingCount == 1)
            let status = await OutboxStatus(outbox: outbox)
            try await observed { status.isWaitingForNetwork }
            #expect(await status.isSending == false)

            // And the probes that find no network do not make it flap to "sending"
            for probe in 1...2 {
                await clock.sleepers(atLeast: 1)
                clock.advance(by: .seconds(30))
                #expect(try await outbox.snapshot().isWaitingForNetwork, "probe \(probe)")
            }

            // When the network is back, the next probe finds it and it is sent
            transport.isOffline = false
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .seconds(30))
            #expect(try await ticket.outcome().get().status == 201)
            var followed: [OutboxChange.Step] = []
            for await change in changes {
                guard change.entry == ticket.id.rawValue, let step = change.step else { continue }
                followed.append(step)
                if step.isFinal { break }
            }
            #expect(followed.prefix(3) == [.queued, .sending, .waitingForNetwork], "\(followed)")
            #expect(followed.last == .committed)
            #expect(followed.filter { $0 == .waitingForNetwork }.count == 1, "\(followed)")
            let after = try await outbox.snapshot()
            #expect(!after.isWaitingForNetwork && !after.isSending && after.pendingCount == 0)
            try await Self.quit(controller, outbox, closing: store)
        }
    }

    /// At launch, a status made after `start()` counts what earlier launches
    /// left queued from its first frame, not "outbox empty".
    @Test @MainActor func aStatusMadeAtLaunchCountsWhatEarlierLaunchesLeft() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let setup = Setup(folder: folder)
        do {
            // An earlier launch queued one post while offline, and quit
            let store = try setup.store()
            let controller = setup.offlineController(store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            try await outbox.send(SendPost("local-1", "queued last time"))
            try await Self.quit(controller, outbox, closing: store)
        }
        let store = try setup.store()
        let controller = setup.offlineController(store: store)
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        try await outbox.start()
        let status = await OutboxStatus(outbox: outbox)
        #expect(status.pendingCount == 1)
        try await Self.quit(controller, outbox, closing: store)
    }

    /// A post written under its local id and committed with the server's id
    /// keeps the local id as its identity (the server's id in a column of its
    /// own): live results see ONE update of the same row, never the row
    /// vanishing and coming back.
    @Test @MainActor func aCommitThatBringsTheServerIDIsOneUpdateOfTheSameRow() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        do {
            let store = try Setup(folder: folder).store()
            let (transport, clock, controller) = Self.offlineUntilTold(answering: "/posts", with: Data(#"{"id": 42, "text": "hi"}"#.utf8), store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let results = try ResultsController(store: store, request: PostRow.order(Column("localID")))
            var updates = results.updates().makeAsyncIterator()
            #expect(await updates.next()?.snapshot.isEmpty == true)

            // The optimistic row arrives (as section 0: the results were empty)
            let ticket = try await outbox.send(SendPost("local-1", "hi"))
            let pending = try #require(await updates.next())
            #expect(pending.changes?.insertedSections == [0])
            #expect(pending.snapshot.fetchedObjects == [PostRow(localID: "local-1", serverID: nil, text: "hi", isPending: true)])

            // When the network is back and the server answers with its id
            transport.isOffline = false
            await clock.sleepers(atLeast: 1)
            clock.advance(by: .seconds(30))
            #expect(try await ticket.outcome().get().status == 201)

            // Then the same row is updated in place
            let committed = try #require(await updates.next())
            let changes = try #require(committed.changes)
            #expect(changes.updated == [ItemPath(section: 0, item: 0)], "\(changes)")
            #expect(changes.inserted.isEmpty && changes.deleted.isEmpty && changes.moved.isEmpty)
            #expect(changes.insertedSections.isEmpty && changes.deletedSections.isEmpty)
            #expect(committed.snapshot.fetchedObjects == [PostRow(localID: "local-1", serverID: 42, text: "hi", isPending: false)])
            try await Self.quit(controller, outbox, closing: store)
        }
    }

    /// Each entry's steps are outbox changes, in order; a ticket follows
    /// its own, and one decided already reports its final step at once.
    @Test func everyStepOfAnEntryIsAChangeAndTheTicketFollowsIt() async throws {
        try await withOnlineOutbox { _, _, controller, outbox in
            let changes = outbox.changes()
            let rejected = try await outbox.send(SendPost("local-1", ""))
            let accepted = try await outbox.send(SendPost("local-2", "fine"))
            var steps: [Int64: [String]] = [:]
            for await change in changes {
                guard let entry = change.entry, let step = change.step else { continue }
                steps[entry, default: []].append("\(step)")
                if steps[accepted.id.rawValue]?.last == "committed" { break }
            }
            #expect(steps[rejected.id.rawValue] == ["queued", "sending", "rolledBack"])
            #expect(steps[accepted.id.rawValue] == ["queued", "sending", "committed"])
            var followed: [OutboxChange.Step] = []
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
            var followed: [OutboxChange.Step] = []
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

extension OutboxTests.PostRow: Identifiable {
    /// The local id: it stays when the server's id arrives.
    var id: String { localID }
}
