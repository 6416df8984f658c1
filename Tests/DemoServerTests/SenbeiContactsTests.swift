import AsyncHTTPClient
@testable import DemoServer
import Foundation
import NIOHTTP1
import Testing

/// Contacts with versions over real HTTP: `GET`, `PATCH` and `DELETE
/// /contacts/:id` with `ETag` and `If-Match`, their `Idempotency-Key`, and
/// their changes in the CRM's feed.
@Suite(.timeLimit(.minutes(1))) struct SenbeiContactsTests {
    let routes = AppRoutesTests()

    /// Sends with the CRM's credentials, `If-Match: "<ifMatch>"` and `Idempotency-Key: key` when given.
    func send(_ server: DemoServer, _ method: HTTPMethod, _ path: String, json: String? = nil, ifMatch: Int? = nil, key: String? = nil) async throws -> NerdfeedRoutesTests.Fetched {
        var headers = ["Authorization": AppRoutesTests.auth]
        if let ifMatch { headers["If-Match"] = "\"\(ifMatch)\"" }
        if let key { headers["Idempotency-Key"] = key }
        return try await routes.send(server, method, path, json: json, headers: headers)
    }

    /// The field errors of a 422 (or 404, 428) body.
    func errors(_ answer: NerdfeedRoutesTests.Fetched) throws -> [String: [String]] {
        try #require(try routes.object(answer.body)["errors"] as? [String: [String]], "\(answer.body)")
    }

    /// The entries of `GET /crm/changes?since=0`.
    func changes(_ server: DemoServer) async throws -> [[String: Any]] {
        try #require(try routes.object(try await routes.send(server, .GET, "/crm/changes?since=0").body)["changes"] as? [[String: Any]])
    }

    @Test func aContactHasAVersionAndItsETag() async throws {
        try await DemoServer.withRunning { server in
            let seeded = try await send(server, .GET, "/contacts/3")
            #expect(seeded.status == 200)
            #expect(seeded.headers["etag"] == #""1""#)
            let contact = try routes.object(seeded.body)
            #expect(contact["id"] as? Int == 3 && contact["version"] as? Int == 1)
            let listed = try routes.object(try await send(server, .GET, "/contacts?per_page=100").body)["items"] as? [[String: Any]]
            #expect(listed?.allSatisfy { $0["version"] as? Int == 1 } == true)

            let created = try await send(server, .POST, "/contacts", json: #"{"name": "Zoe Quinn"}"#, key: "new")
            #expect(created.status == 201 && created.headers["etag"] == #""1""#)
            #expect(try routes.object(created.body)["version"] as? Int == 1)
            // A replay carries the ETag too.
            #expect(try await send(server, .POST, "/contacts", json: #"{"name": "Zoe Quinn"}"#, key: "new").headers["etag"] == #""1""#)

            let unchanged = try await routes.send(server, .GET, "/contacts/3", headers: ["Authorization": AppRoutesTests.auth, "If-None-Match": #""1""#])
            #expect(unchanged.status == 304 && unchanged.headers["etag"] == #""1""#)
            #expect(try await send(server, .GET, "/contacts/99999").status == 404)
            #expect(try await routes.send(server, .GET, "/contacts/3", headers: [:]).status == 401)
        }
    }

    // MARK: - PATCH

    @Test func aPatchAtTheCurrentVersionAnswersTheNextOne() async throws {
        try await DemoServer.withRunning { server in
            let edited = try await send(server, .PATCH, "/contacts/3", json: #"{"phone": "+44 20 7946 0000", "company": null}"#, ifMatch: 1)
            #expect(edited.status == 200, "\(edited.body)")
            #expect(edited.headers["etag"] == #""2""#)
            let contact = try routes.object(edited.body)
            #expect(contact["version"] as? Int == 2 && contact["phone"] as? String == "+44 20 7946 0000")
            #expect(contact["company"] == nil && contact["name"] is String)
            #expect(try await send(server, .GET, "/contacts/3").body == edited.body)
        }
    }

    @Test func aStalePatchAnswersTheContactAsItIsNow() async throws {
        try await DemoServer.withRunning { server in
            let first = try await send(server, .PATCH, "/contacts/3", json: #"{"name": "Ann Smith"}"#, ifMatch: 1)
            #expect(first.status == 200)
            let stale = try await send(server, .PATCH, "/contacts/3", json: #"{"name": "Ann Jones"}"#, ifMatch: 1)
            #expect(stale.status == 412)
            #expect(stale.headers["etag"] == #""2""#)
            #expect(stale.body == first.body, "the current contact, unchanged by the stale edit")
        }
    }

    @Test func aPatchWithoutIfMatchIsRefused() async throws {
        try await DemoServer.withRunning { server in
            let refused = try await send(server, .PATCH, "/contacts/3", json: #"{"name": "Ann Smith"}"#)
            #expect(refused.status == 428)
            #expect(try errors(refused)["if_match"]?.first?.hasPrefix("is required") == true)
            #expect(try routes.object(try await send(server, .GET, "/contacts/3").body)["version"] as? Int == 1)
        }
    }

    @Test func aPatchToAnUnknownContactIsNotFound() async throws {
        try await DemoServer.withRunning { server in
            let unknown = try await send(server, .PATCH, "/contacts/99999", json: #"{"name": "Nobody"}"#, ifMatch: 1)
            #expect(unknown.status == 404)
            #expect(try errors(unknown)["base"] == ["there is no contact 99999"])
            #expect(try await send(server, .DELETE, "/contacts/3", ifMatch: 1).status == 204)
            #expect(try await send(server, .PATCH, "/contacts/3", json: #"{"name": "Ann"}"#, ifMatch: 1).status == 404)
        }
    }

    @Test func aPatchOfFieldsAContactDoesNotHaveIsRefused() async throws {
        try await DemoServer.withRunning { server in
            let unknown = try await send(server, .PATCH, "/contacts/3", json: #"{"title": "CEO", "name": "Ann"}"#, ifMatch: 1)
            #expect(unknown.status == 422)
            #expect(try errors(unknown) == ["title": ["is not a contact field (name, email, company, phone)"]])
            let wrong = try await send(server, .PATCH, "/contacts/3", json: #"{"name": " ", "email": "nope", "phone": 7}"#, ifMatch: 1)
            #expect(try errors(wrong) == ["name": ["can't be blank"], "email": ["is invalid"], "phone": ["must be a string or null"]])
            #expect(try errors(try await send(server, .PATCH, "/contacts/3", json: "{}", ifMatch: 1))["base"] != nil)
            #expect(try errors(try await send(server, .PATCH, "/contacts/3", json: "[1]", ifMatch: 1))["base"] != nil)
            #expect(try routes.object(try await send(server, .GET, "/contacts/3").body)["version"] as? Int == 1)
        }
    }

    // MARK: - DELETE

    @Test func aDeleteAtTheCurrentVersionRemovesTheContact() async throws {
        try await DemoServer.withRunning { server in
            let total = try routes.object(try await send(server, .GET, "/contacts").body)["total"] as? Int
            let deleted = try await send(server, .DELETE, "/contacts/3", ifMatch: 1)
            #expect(deleted.status == 204 && deleted.body.isEmpty)
            #expect(try await send(server, .GET, "/contacts/3").status == 404)
            let listed = try routes.object(try await send(server, .GET, "/contacts?per_page=100").body)
            #expect((listed["items"] as? [[String: Any]])?.contains { $0["id"] as? Int == 3 } == false)
            #expect(listed["total"] as? Int == total.map { $0 - 1 })
        }
    }

    @Test func aStaleDeleteAnswersTheContactAsItIsNow() async throws {
        try await DemoServer.withRunning { server in
            let edited = try await send(server, .PATCH, "/contacts/3", json: #"{"email": "ann@example.com"}"#, ifMatch: 1)
            let stale = try await send(server, .DELETE, "/contacts/3", ifMatch: 1)
            #expect(stale.status == 412)
            #expect(stale.headers["etag"] == #""2""#)
            #expect(stale.body == edited.body)
            #expect(try await send(server, .GET, "/contacts/3").status == 200)
        }
    }

    @Test func aDeleteWithoutIfMatchIsRefused() async throws {
        try await DemoServer.withRunning { server in
            let refused = try await send(server, .DELETE, "/contacts/3")
            #expect(refused.status == 428)
            #expect(try errors(refused)["if_match"] != nil)
            #expect(try await send(server, .GET, "/contacts/3").status == 200)
        }
    }

    @Test func aDeleteOfAnUnknownOrDeletedContactIsNotFound() async throws {
        try await DemoServer.withRunning { server in
            #expect(try await send(server, .DELETE, "/contacts/99999", ifMatch: 1).status == 404)
            #expect(try await send(server, .DELETE, "/contacts/3", ifMatch: 1).status == 204)
            let again = try await send(server, .DELETE, "/contacts/3", ifMatch: 1)
            #expect(again.status == 404)
            #expect(try errors(again)["base"] == ["there is no contact 3"])
        }
    }

    // MARK: - Idempotency-Key

    @Test func aRepeatedPatchIsReplayedAndChangesOnce() async throws {
        try await DemoServer.withRunning { server in
            let body = #"{"company": "Initech"}"#
            let first = try await send(server, .PATCH, "/contacts/3", json: body, ifMatch: 1, key: "edit-1")
            // The same request again, even with the version it now knows: the first answer.
            let again = try await send(server, .PATCH, "/contacts/3", json: body, ifMatch: 2, key: "edit-1")
            #expect(first.status == 200 && again.status == 200)
            #expect(again.body == first.body && again.headers["etag"] == #""2""#)
            #expect(first.headers["idempotent-replayed"] == nil && again.headers["idempotent-replayed"] == "true")
            #expect(try await changes(server).count == 1)
            #expect(server.deliveries(ofIdempotencyKey: "edit-1") == ["PATCH /contacts/3": 2])

            let delete = try await send(server, .DELETE, "/contacts/3", ifMatch: 2, key: "delete-1")
            let deleteAgain = try await send(server, .DELETE, "/contacts/3", ifMatch: 2, key: "delete-1")
            #expect(delete.status == 204 && deleteAgain.status == 204 && deleteAgain.headers["idempotent-replayed"] == "true")
            #expect(try await changes(server).count == 2)
        }
    }

    @Test func theRouteThatIgnoresTheKeyAppliesARepeat() async throws {
        try await DemoServer.withRunning { server in
            let body = #"{"phone": "555-0100"}"#
            let path = "/contacts/3?idempotency=ignored"
            let first = try await send(server, .PATCH, path, json: body, ifMatch: 1, key: "edit-1")
            let again = try await send(server, .PATCH, path, json: body, ifMatch: 2, key: "edit-1")
            #expect(first.status == 200 && first.headers["etag"] == #""2""#)
            #expect(again.status == 200 && again.headers["etag"] == #""3""#, "applied again, not replayed")
            #expect(again.headers["idempotent-replayed"] == nil)
            #expect(try await changes(server).count == 2)
            #expect(server.deliveries(ofIdempotencyKey: "edit-1") == ["PATCH /contacts/3": 2])
            // The counts are in /_stats too, for a server in another process.
            let stats = try await routes.send(server, .GET, "/_stats", headers: [:])
            let keys = try #require(try routes.object(stats.body)["idempotencyKeys"] as? [String: [String: Int]])
            #expect(keys["edit-1"] == ["PATCH /contacts/3": 2])
        }
    }

    /// `POST /tasks?idempotency=ignored` makes a task per request, whatever
    /// its key; without the query a repeat is replayed.
    @Test func postingATaskThatIgnoresTheKeyMakesItAgain() async throws {
        try await DemoServer.withRunning { server in
            let body = #"{"name": "Call Ann twice"}"#
            for _ in 0..<2 { _ = try await send(server, .POST, "/tasks?idempotency=ignored", json: body, key: "task-1") }
            for _ in 0..<2 { _ = try await send(server, .POST, "/tasks", json: body, key: "task-2") }
            let tasks = try await routes.send(server, .GET, "/tasks", headers: ["Authorization": AppRoutesTests.auth])
            let names = try #require(try JSONSerialization.jsonObject(with: Data(tasks.body.utf8)) as? [[String: Any]]).compactMap { $0["name"] as? String }
            #expect(names.filter { $0 == "Call Ann twice" }.count == 3)
            #expect(server.deliveries(ofIdempotencyKey: "task-1") == ["POST /tasks": 2])
            #expect(server.deliveries(ofIdempotencyKey: "task-2") == ["POST /tasks": 2])
        }
    }

    // MARK: - The change feed

    @Test func editsAndDeletesAreInTheChangeFeed() async throws {
        try await DemoServer.withRunning { server in
            var stream = try await EventStreamReader.open(server, "/crm/events", headers: ["Authorization": AppRoutesTests.auth])
            let edited = try await send(server, .PATCH, "/contacts/3", json: #"{"name": "Ann Smith"}"#, ifMatch: 1)
            #expect(try await send(server, .DELETE, "/contacts/4", ifMatch: 1).status == 204)
            #expect(try await stream.next(2) == "id: 1\nevent: contact\ndata: \(edited.body)\n\nid: 2\nevent: delete-contact\ndata: {\"id\":4}\n\n")

            let entries = try await changes(server)
            #expect(entries.compactMap { $0["change"] as? String } == ["contact", "delete-contact"])
            #expect((entries.first?["contact"] as? [String: Any])?["version"] as? Int == 2)
            #expect(entries.last?["id"] as? Int == 4 && entries.last?["seq"] as? Int == 2)
            let activities = try routes.array(try await send(server, .GET, "/activities").body)
            #expect(activities.prefix(2).compactMap { $0["action"] as? String } == ["deleted", "updated"])
        }
    }
}
