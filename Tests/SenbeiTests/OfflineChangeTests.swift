import DemoServer
import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// Each of Senbei's five changes, made while the server cannot be reached:
/// queued durably, shown at once in the cached lists, marked pending, and
/// sent by a later launch (its first answer lost on the way, so the server
/// must recognise the repeat by its `Idempotency-Key`): accepted once, and the
/// pending row replaced without a duplicate. A refusal rolls back and is kept
/// with the server's words.
@Suite(.timeLimit(.minutes(2)))
@MainActor
struct OfflineChangeTests {
    /// Queues a change in an app that cannot reach the server and checks what
    /// it shows (`offline`); then, in the fixture's app, runs `online` (before
    /// anything is sent), loses the first answer on `route`, starts the outbox as
    /// a launch does and waits for the change's answer.
    func sendLater<Record>(
        _ f: Fixture,
        losingTheFirstAnswerOn route: String,
        _ change: (SenbeiApp) async throws(DepotError) -> QueuedChange<Record>,
        offline: (SenbeiApp) async throws -> Void,
        online: () async throws -> Void = {}
    ) async throws -> Result<NetworkResponse, DepotError> {
        if f.app.profile == nil { try await f.app.login() }
        var queued: OutboxEntry.ID?
        try await f.withOfflineApp { app in
            let outcome = try await app.outcome(of: change(app))
            guard case .queued(let entry) = outcome else {
                Issue.record("sent without a server: \(outcome)")
                return
            }
            #expect(try await app.outbox.entries().map(\.id) == [entry])
            queued = entry
            try await offline(app)
        }
        let entry = try #require(queued)
        try await online()
        try await f.dropResponses(1, on: route)
        try await f.app.start()
        return await f.app.outbox.outcome(of: entry)
    }

    /// The answer was the server's first, replayed for the repeated request.
    func expectReplayed(_ answer: Result<NetworkResponse, DepotError>, status: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        switch answer {
        case .success(let response):
            #expect(response.status == status, sourceLocation: sourceLocation)
            #expect(response.headers["Idempotent-Replayed"] == "true", "the repeat was answered from the key", sourceLocation: sourceLocation)
        case .failure(let error):
            Issue.record("not accepted: \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test func aTaskCreatedOfflineIsPendingThenCreatedOnce() async throws {
        try await withSenbei { f in
            _ = try await f.app.loadTasks()
            let answer = try await sendLater(f, losingTheFirstAnswerOn: "/tasks", { app throws(DepotError) in
                try await app.createTask(name: "Send the contract", due: "2030-01-02")
            }, offline: { app in
                let tasks = try await app.loadTasks()
                #expect(tasks.source == .offline)
                let pending = try #require(tasks.rows.first { $0.name == "Send the contract" })
                #expect(pending.pending == .create && pending.id < 0 && pending.due == "2030-01-02")
                let lines = SenbeiPresentation.taskLines(TaskBuckets().group(tasks.rows, now: f.date.now))
                #expect(lines.contains("  new    Send the contract (due 2030-01-02)  ◌ sending…"), "\(lines)")
            }, online: {
                // A refresh before it is sent does not undo it.
                let refreshed = try await f.app.loadTasks()
                #expect(refreshed.source == .network)
                #expect(refreshed.rows.filter { $0.name == "Send the contract" }.map(\.pending) == [.create])
            })
            expectReplayed(answer, status: 201)
            let cached = try await f.store.read { db in try CRMTask.filter(Column("name") == "Send the contract").fetchAll(db) }
            #expect(cached.count == 1 && cached.first.map { $0.id > 0 && $0.pending == nil } == true, "\(cached)")
            let onServer = try await f.app.loadTasks().rows.filter { $0.name == "Send the contract" }
            #expect(onServer.map(\.id) == cached.map(\.id))
            #expect(try await f.app.loadActivities().rows.filter { $0.subject == "task Send the contract" }.count == 1)
            #expect(try await f.app.outbox.entries().isEmpty)
        }
    }

    @Test func aTaskMarkedDoneOfflineIsPendingThenDoneOnce() async throws {
        try await withSenbei { f in
            let name = try #require(try await f.app.loadTasks().rows.first { $0.id == 3 }?.name)
            let answer = try await sendLater(f, losingTheFirstAnswerOn: "/tasks/3/complete", { app throws(DepotError) in
                try await app.markTaskDone(id: 3)
            }, offline: { app in
                let tasks = try await app.loadTasks()
                #expect(tasks.rows.first { $0.id == 3 }?.pending == .complete, "still listed, marked")
                let lines = SenbeiPresentation.taskLines(TaskBuckets().group(tasks.rows, now: f.date.now))
                #expect(lines.contains { $0.hasPrefix("  #3 ") && $0.hasSuffix("  ◌ marking done…") }, "\(lines)")
            })
            expectReplayed(answer, status: 200)
            #expect(try await f.store.read { db in try CRMTask.fetchOne(db, key: 3) }.map { $0.completed && $0.pending == nil } == true)
            #expect(try await f.app.loadTasks().rows.contains { $0.id == 3 } == false)
            // Done once: a second completion would be a second activity.
            #expect(try await f.app.loadActivities().rows.filter { $0.subject == "task \(name)" && $0.action == "completed" }.count == 1)
        }
    }

    @Test func aCommentPostedOfflineIsPendingThenPostedOnce() async throws {
        try await withSenbei { f in
            let subject = Commentable(.contacts, 3)
            _ = try await f.app.sent(f.app.postComment(on: subject, text: "Left a message"))
            _ = try await f.app.loadComments(on: subject)
            let answer = try await sendLater(f, losingTheFirstAnswerOn: "/comments", { app throws(DepotError) in
                try await app.postComment(on: subject, text: "Called back")
            }, offline: { app in
                let comments = try await app.loadComments(on: subject)
                #expect(comments.source == .offline)
                #expect(comments.rows.map(\.text) == ["Left a message", "Called back"], "after the server's, in order")
                #expect(comments.rows.last.map { $0.pending == .create && $0.id < 0 } == true)
                #expect(SenbeiPresentation.commentLines(comments.rows, on: subject).last == "  new     Called back  ◌ sending…")
            })
            expectReplayed(answer, status: 201)
            let cached = try await f.store.read { db in try CRMComment.on(subject).fetchAll(db) }
            #expect(cached.map(\.text) == ["Left a message", "Called back"] && cached.allSatisfy { $0.id > 0 && $0.pending == nil }, "\(cached)")
            #expect(try await f.app.loadComments(on: subject).rows.map(\.id) == cached.map(\.id), "the server has it once")
        }
    }

    @Test func aCommentDeletedOfflineIsPendingThenDeletedOnce() async throws {
        try await withSenbei { f in
            let subject = Commentable(.contacts, 3)
            let comment = try await f.app.sent(f.app.postComment(on: subject, text: "Wrong number"))
            _ = try await f.app.loadComments(on: subject)
            let answer = try await sendLater(f, losingTheFirstAnswerOn: "/comments/\(comment.id)", { app throws(DepotError) in
                try await app.deleteComment(id: comment.id)
            }, offline: { app in
                let comments = try await app.loadComments(on: subject)
                #expect(comments.rows.map(\.pending) == [.delete], "still listed, marked")
                #expect(SenbeiPresentation.commentLines(comments.rows, on: subject).last == "  #\(comment.id)  Wrong number  ◌ deleting…")
            })
            // A repeat without the key would find nothing to delete (404) and roll back.
            expectReplayed(answer, status: 204)
            #expect(try await f.store.read { db in try CRMComment.fetchCount(db) } == 0)
            #expect(try await f.app.loadComments(on: subject).rows.isEmpty)
        }
    }

    @Test func aContactCreatedOfflineIsPendingThenCreatedOnce() async throws {
        try await withSenbei { f in
            let before = try await f.app.loadPage(.contacts)
            let answer = try await sendLater(f, losingTheFirstAnswerOn: "/contacts", { app throws(DepotError) in
                try await app.createContact(name: "Zoe Quinn", email: "zoe@example.com")
            }, offline: { app in
                let page = try await app.loadPage(.contacts)
                #expect(page.source == .cache)
                let first = try #require(page.items.first)
                #expect(first.name == "Zoe Quinn" && first.pending == .create && first.id < 0)
                #expect(page.info.total == before.info.total + 1, "counted at once")
                #expect(SenbeiPresentation.entityLine(first).hasPrefix("new    Zoe Quinn"))
                #expect(SenbeiPresentation.entityLine(first).hasSuffix("◌ sending…"))
            })
            expectReplayed(answer, status: 201)
            let cached = try await f.app.loadPage(.contacts)
            #expect(cached.items.filter { $0.name == "Zoe Quinn" }.map { $0.id > 0 && $0.pending == nil } == [true])
            #expect(cached.info.total == before.info.total + 1, "counted once")
            let fresh = try await f.app.loadPage(.contacts, refresh: true)
            #expect(fresh.items.filter { $0.name == "Zoe Quinn" }.count == 1, "the server has it once")
            #expect(fresh.info.total == before.info.total + 1)
        }
    }

    /// A change the server refuses when it is finally sent (422) is rolled
    /// back: the pending row goes, and the refusal is kept with the server's
    /// words, for the app to show once.
    @Test func aRefusalOnReplayRollsBackAndKeepsTheServersWords() async throws {
        try await withSenbei { f in
            _ = try await f.app.loadTasks()
            var entry: OutboxEntry.ID?
            try await f.withOfflineApp { app in
                entry = try await app.outcome(of: app.createTask(name: " ")).queuedEntry
                #expect(try await app.loadTasks().rows.filter { $0.pending == .create }.count == 1)
            }
            try await f.app.start()
            guard case .failure(let error) = await f.app.outbox.outcome(of: try #require(entry)) else {
                Issue.record("a blank task was accepted")
                return
            }
            #expect(error.status == 422)
            #expect(try await f.store.read { db in try CRMTask.filter(Column("pending") != nil).fetchCount(db) } == 0, "rolled back")
            let rejected = try await f.app.rejectedChanges()
            #expect(rejected.map(\.summary) == ["new task \" \""] && rejected.map(\.reason) == ["name can't be blank"])
            #expect(rejected.map(SenbeiPresentation.rejectionLine) == ["Not saved: new task \" \": name can't be blank."])
            try await f.app.dismissRejectedChanges(rejected)
            #expect(try await f.app.rejectedChanges().isEmpty)
            #expect(try await f.app.loadTasks().rows.count == 12, "nothing was created")
        }
    }

    /// A refusal the caller waits for is thrown, with the server's words,
    /// and not kept for later (it was told).
    @Test func aRefusalTheCallerWaitsForIsThrownNotKept() async throws {
        try await withSenbei { f in
            try await f.app.login()
            let error = await #expect(throws: DepotError.self) { try await f.app.sent(f.app.createContact(name: " ")) }
            #expect(error?.validationErrors?.fullMessages == ["name can't be blank"])
            #expect(try await f.app.rejectedChanges().isEmpty)
            #expect(try await f.store.read { db in try Entity.filter(Column("pending") != nil).fetchCount(db) } == 0)
        }
    }
}

extension ChangeOutcome {
    /// The outbox entry, if the change stayed queued.
    var queuedEntry: OutboxEntry.ID? {
        if case .queued(let entry) = self { return entry }
        return nil
    }
}
