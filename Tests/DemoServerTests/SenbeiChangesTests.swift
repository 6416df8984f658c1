import AsyncHTTPClient
@testable import DemoServer
import Foundation
import Testing

/// The CRM's one change feed over real HTTP: `GET /crm/events`,
/// `GET /crm/changes` and the lists' `Change-Cursor`.
@Suite(.timeLimit(.minutes(1))) struct SenbeiChangesTests {
    let routes = AppRoutesTests()
    let auth = ["Authorization": AppRoutesTests.auth]

    @Test func everyContactAndTaskWriteIsAnEvent() async throws {
        try await DemoServer.withRunning { server in
            var stream = try await EventStreamReader.open(server, "/crm/events", headers: auth)
            #expect(stream.status == 200)
            #expect(stream.headers["content-type"] == "text/event-stream")

            let contact = try await routes.send(server, .POST, "/contacts", json: #"{"name": "Zoe Quinn", "email": "zoe@example.com"}"#)
            let task = try await routes.send(server, .POST, "/tasks", json: #"{"name": "Call Zoe", "due": "2026-01-05"}"#)
            let done = try await routes.send(server, .PUT, "/tasks/1/complete")
            // A comment is neither a contact nor a task: no change.
            _ = try await routes.send(server, .POST, "/comments", json: #"{"commentable_type": "contact", "commentable_id": 3, "comment": "hi"}"#)
            let again = try await routes.send(server, .POST, "/contacts", json: #"{"name": "Yan"}"#)

            let expected = [
                "id: 1\nevent: contact\ndata: \(contact.body)\n\n",
                "id: 2\nevent: task\ndata: \(task.body)\n\n",
                "id: 3\nevent: task\ndata: \(done.body)\n\n",
                "id: 4\nevent: contact\ndata: \(again.body)\n\n",
            ]
            #expect(try await stream.next(4) == expected.joined())
            #expect(done.body.contains(#""completed":true"#))
            // The contact's data is the item as GET /contacts encodes it.
            let list = try await routes.send(server, .GET, "/contacts?per_page=1")
            #expect(list.body.hasPrefix(#"{"items":[\#(again.body)]"#), "\(list.body)")
            #expect(list.headers["change-cursor"] == "4")
            #expect(try await routes.send(server, .GET, "/tasks").headers["change-cursor"] == "4")
        }
    }

    @Test func changesArePagedWithTheItemUnderItsKind() async throws {
        try await DemoServer.withRunning(.init(changeHistory: 10)) { server in
            _ = try await routes.send(server, .POST, "/_control", json: #"{"crmChanges": {"contacts": 2, "tasks": 1}}"#, headers: [:])
            let answer = try await routes.send(server, .GET, "/crm/changes?since=0&limit=2")
            #expect(answer.status == 200)
            let page = try routes.object(answer.body)
            let entries = try #require(page["changes"] as? [[String: Any]])
            #expect(entries.compactMap { $0["seq"] as? Int } == [1, 2])
            #expect(entries.allSatisfy { $0["change"] as? String == "contact" && ($0["contact"] as? [String: Any])?["name"] is String })
            #expect(page["cursor"] as? Int == 2 && page["more"] as? Bool == true)

            let rest = try routes.object(try await routes.send(server, .GET, "/crm/changes?since=2").body)
            let task = try #require((rest["changes"] as? [[String: Any]])?.first)
            #expect(task["change"] as? String == "task")
            #expect((task["task"] as? [String: Any])?["completed"] as? Bool == false)
            #expect(rest["more"] as? Bool == false)

            _ = try await routes.send(server, .POST, "/_control", json: #"{"crmChanges": {"tasks": 20}}"#, headers: [:])
            #expect(try await routes.send(server, .GET, "/crm/changes?since=2").status == 410)
            #expect(try await routes.send(server, .GET, "/crm/changes").status == 400)
            var reset = try await EventStreamReader.open(server, "/crm/events", headers: auth.merging(["Last-Event-ID": "2"]) { $1 })
            #expect(try await reset.next() == "id: 23\nevent: reset\ndata: {\"cursor\":23}\n\n")
        }
    }

    @Test func theCRMFeedNeedsTheCRMsAuthentication() async throws {
        try await DemoServer.withRunning { server in
            #expect(try await routes.send(server, .GET, "/crm/changes?since=0", headers: [:]).status == 401)
            let stream = try await EventStreamReader.open(server, "/crm/events")
            #expect(stream.status == 401)
        }
    }
}
