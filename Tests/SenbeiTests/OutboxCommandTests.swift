import CLITestSupport
import DemoServer
import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// The `senbei` executable's changes through the outbox, as a user runs them:
/// offline they are queued (exit 0) and listed, marked; a later run sends
/// them; `senbei outbox` lists, retries and discards entries.
@Suite(.timeLimit(.minutes(2)))
struct OutboxCommandTests {
    /// Where nothing listens: every connection is refused at once.
    static let unreachable = "http://127.0.0.1:1"

    /// Runs senbei against a server that cannot be reached, with the cache in `folder`.
    static func offline(_ arguments: [String], folder: URL) async throws -> ChildResult {
        try await Executables.run("senbei", arguments + ["--server", unreachable, "--cache", folder.appending(path: "cache.sqlite").path], environment: ["TZ": "UTC"])
    }

    static func online(_ arguments: [String], server: DemoServer, folder: URL) async throws -> ChildResult {
        try await CommandLineTests.senbei(arguments, server: server, folder: folder)
    }

    @Test func offlineChangesAreQueuedListedMarkedAndSentByALaterRun() async throws {
        let folder = try Executables.temporaryFolder("senbei-outbox")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7, epoch: Date())) { server in
            // Given a cache filled while online, and a comment posted then
            for list in [["tasks"], ["contacts"]] { #expect(try await Self.online(list, server: server, folder: folder).status == 0) }
            let posted = try await Self.online(["comment", "--contact", "3", "Wrong number"], server: server, folder: folder)
            let comment = try #require(posted.output.split(separator: "#").last?.split(separator: " ").first.flatMap { Int($0) }, "\(posted.output)")
            #expect(try await Self.online(["comments", "--contact", "3"], server: server, folder: folder).status == 0)

            // When five changes are made without a server: each is durable at once (exit 0) and says so
            let changes: [([String], String)] = [
                (["new-task", "Send the contract", "--due", "2030-01-02"], "Task \"Send the contract\""),
                (["done", "3"], "Done for task #3"),
                (["comment", "--contact", "3", "Called back"], "Comment on contact 3"),
                (["uncomment", "\(comment)"], "Deleting comment #\(comment)"),
                (["new-contact", "Zoe Quinn", "--email", "zoe@example.com"], "Contact \"Zoe Quinn\""),
            ]
            // (The comment posted online was outbox entry #1: entries are numbered for good.)
            for (number, (arguments, what)) in zip(2..., changes) {
                let run = try await Self.offline(arguments, folder: folder)
                #expect(run.status == 0, "\(arguments): \(run.error)")
                #expect(run.output == "\(what) queued: will be sent when online (outbox entry #\(number)).\n")
                #expect(run.error.isEmpty, "\(run.error)")
            }

            // Then the lists show them at once, marked
            let tasks = try await Self.offline(["tasks"], folder: folder).output
            #expect(tasks.contains("\n  new    Send the contract (due 2030-01-02)  ◌ sending…\n"), "\(tasks)")
            #expect(tasks.split(separator: "\n").contains { $0.hasPrefix("  #3 ") && $0.hasSuffix("  ◌ marking done…") }, "\(tasks)")
            let comments = try await Self.offline(["comments", "--contact", "3"], folder: folder).output
            #expect(comments.hasSuffix("Comments on contact 3:\n  #\(comment)  Wrong number  ◌ deleting…\n  new     Called back  ◌ sending…\n"), "\(comments)")
            let contacts = try await Self.offline(["contacts"], folder: folder).output.split(separator: "\n")
            #expect(contacts.first?.contains("(52 in all)") == true, "\(contacts)")
            #expect(contacts.dropFirst().first == "  new    Zoe Quinn                       zoe@example.com               ◌ sending…")

            // And the outbox lists them in order, in their lanes
            let outbox = try await Self.offline(["outbox"], folder: folder)
            let lines = outbox.output.split(separator: "\n").map(String.init)
            #expect(lines.first == "5 changes in the outbox:", "\(outbox.output)")
            let types = ["senbei.newTask.v1", "senbei.markTaskDone.v1", "senbei.newComment.v1", "senbei.deleteComment.v1", "senbei.newContact.v1"]
            #expect(lines.count == 6)
            for (index, line) in lines.dropFirst().enumerated() {
                #expect(line.hasPrefix("  #\(index + 2)   pending  \(types[index]) "), "\(line)")
                #expect(line.hasSuffix("0 attempts"), "\(line)")
            }
            #expect(lines.contains { $0.contains("lane senbei.task.3 ") } && lines.contains { $0.contains("lane senbei.comments.contact.3 ") })

            // When a later run reaches the server, it sends them all
            let later = try await Self.online(["login"], server: server, folder: folder)
            #expect(later.status == 0 && later.error.isEmpty, "\(later.error)")
            #expect(try await Self.online(["outbox"], server: server, folder: folder).output == "The outbox is empty: every change was sent.\n")

            // Then the server has each once, and the lists show the server's rows
            let activities = try await Self.online(["activities"], server: server, folder: folder).output
                .split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
            for done in ["created task Send the contract", "created contact Zoe Quinn"] {
                #expect(activities.filter { $0 == done }.count == 1, "\(done) in \(activities)")
            }
            #expect(activities.filter { $0.hasPrefix("completed task ") }.count == 1, "\(activities)")
            #expect(activities.filter { $0 == "commented contact 3" }.count == 2, "\(activities)")
            let after = try await Self.online(["tasks"], server: server, folder: folder).output
            #expect(!after.contains("◌") && !after.contains("\n  #3 ") && after.contains(" Send the contract (due 2030-01-02)"), "\(after)")
            let remaining = try await Self.online(["comments", "--contact", "3"], server: server, folder: folder).output
            #expect(remaining.hasPrefix("Comments on contact 3:\n  #") && remaining.hasSuffix("  Called back\n") && !remaining.contains("Wrong number"), "\(remaining)")
        }
    }

    /// A queued change the server refuses when a later run sends it is rolled
    /// back, and that run says so in one sentence, once.
    @Test func aQueuedChangeTheServerRefusesIsToldOnceInOneSentence() async throws {
        let folder = try Executables.temporaryFolder("senbei-outbox")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            #expect(try await Self.online(["tasks"], server: server, folder: folder).status == 0)
            let queued = try await Self.offline(["new-task", " "], folder: folder)
            #expect(queued.output == "Task \" \" queued: will be sent when online (outbox entry #1).\n")

            let later = try await Self.online(["login"], server: server, folder: folder)
            #expect(later.status == 0)
            #expect(later.error == "senbei: Not saved: new task \" \": name can't be blank.\n")
            let again = try await Self.online(["tasks"], server: server, folder: folder)
            #expect(again.error.isEmpty && !again.output.contains("new "), "told once, rolled back: \(again.output)\(again.error)")
        }
    }

    /// What an older senbei queued under the new-task type name, in a payload
    /// the current one cannot read.
    struct OldCreateTask: Mutation {
        struct Payload: Codable, Sendable { var title: String }
        static let typeName = CreateTask.typeName
        var payload: Payload
        init(payload: Payload) { self.payload = payload }
        var lane: String { "senbei.tasks" }
        var request: NetworkRequest { .post("tasks", json: ["name": payload.title]) }
        func applyOptimistically(_ db: Database) throws {}
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    /// Queues `mutation` in the cache file as an earlier run would have, without sending it.
    static func queueAsAnEarlierRun<M: Mutation>(_ mutation: M, folder: URL) async throws {
        let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: SenbeiSchema.migrator)
        let transport = FixtureTransport()
        transport.isOffline = true
        var configuration = NetworkController.Configuration(baseURL: URL(string: unreachable)!, transport: transport, observability: .init(notificationCenter: nil))
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let outbox = Outbox(store: store, controller: controller, types: [M.self])
        try await outbox.send(mutation)
        _ = await controller.shutdown(grace: .zero)
        await outbox.waitUntilIdle()
        try await store.close()
    }

    @Test func outboxRetriesAndDiscardsOneEntry() async throws {
        let folder = try Executables.temporaryFolder("senbei-outbox")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            // Given an entry an earlier version queued, in a form this one cannot read
            try await Self.queueAsAnEarlierRun(OldCreateTask(payload: .init(title: "Call Ann")), folder: folder)
            let listed = try await Self.offline(["outbox"], folder: folder)
            #expect(listed.output == "1 change in the outbox:\n  #1   pending  senbei.newTask.v1  lane senbei.tasks  0 attempts\n", "looking sends nothing")

            // When a run starts the outbox (here: a change made offline), the entry is stopped as failed, with the reason
            #expect(try await Self.offline(["new-task", "Call Bob"], folder: folder).status == 0)
            let reason = "it cannot be rebuilt: its payload cannot be decoded as senbei.newTask.v1"
            let afterLaunch = try await Self.offline(["outbox"], folder: folder).output.split(separator: "\n")
            #expect(afterLaunch.first == "2 changes in the outbox:")
            #expect(afterLaunch.dropFirst().first?.hasPrefix("  #1   failed   senbei.newTask.v1  lane senbei.tasks ") == true, "\(afterLaunch)")
            #expect(afterLaunch.dropFirst().first?.hasSuffix("0 attempts  last error: \(reason)") == true, "\(afterLaunch)")
            #expect(afterLaunch.last?.hasPrefix("  #2   pending  senbei.newTask.v1  lane senbei.task.new-") == true, "\(afterLaunch)")

            // When it is retried, it fails again, in one sentence
            let failed = try await Self.online(["outbox", "--retry", "1"], server: server, folder: folder)
            #expect(failed.status == 1 && failed.output.isEmpty)
            #expect(failed.error == "senbei: Outbox entry #1 failed again: \(reason); senbei outbox --discard 1 removes it.\n")

            // When the readable one is retried with the server up, it is sent
            let sent = try await Self.online(["outbox", "--retry", "#2"], server: server, folder: folder)
            #expect(sent.status == 0, "\(sent.error)")
            #expect(sent.output == "Sent outbox entry #2 (senbei.newTask.v1).\n")
            #expect(server.currentStats.requests["POST /tasks"] == 1)

            // When the unreadable one is discarded, the outbox is empty
            let discarded = try await Self.offline(["outbox", "--discard", "1"], folder: folder)
            #expect(discarded.status == 0, "\(discarded.error)")
            #expect(discarded.output == "Discarded outbox entry #1 (senbei.newTask.v1); its change was undone in the cache.\n")
            #expect(try await Self.offline(["outbox"], folder: folder).output == "The outbox is empty: every change was sent.\n")
            #expect(server.currentStats.requests["POST /tasks"] == 1, "the unreadable entry never went out")
        }
    }

    @Test(arguments: [
        (["outbox", "--retry", "abc"], "--retry takes an outbox entry number, such as 3 (senbei outbox lists them), not \"abc\"."),
        (["outbox", "--discard", "0"], "--discard takes an outbox entry number, such as 3 (senbei outbox lists them), not \"0\"."),
        (["outbox", "--retry", "99999999999999999999"], "--retry takes an outbox entry number, such as 3 (senbei outbox lists them), not \"99999999999999999999\"."),
        (["outbox", "--retry", "1", "--discard", "1"], "Give either --retry ID or --discard ID, not both."),
        (["outbox", "--retry", "7"], "There is no outbox entry #7; senbei outbox lists them."),
        (["outbox", "--discard", "#7"], "There is no outbox entry #7; senbei outbox lists them."),
    ])
    func aBadOutboxArgumentIsOneSentence(_ arguments: [String], sentence: String) async throws {
        let folder = try Executables.temporaryFolder("senbei-outbox")
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try await Self.offline(arguments, folder: folder)
        #expect(run.status == 1)
        #expect(run.output.isEmpty)
        #expect(run.error == "senbei: \(sentence)\n")
    }
}
