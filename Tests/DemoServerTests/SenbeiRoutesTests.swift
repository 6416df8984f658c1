import AsyncHTTPClient
@testable import DemoServer
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// What the Senbei client relies on beyond `AppRoutesTests`: undated tasks,
/// `base` messages for missing records, and unique activity identifiers.
@Suite(.timeLimit(.minutes(1))) struct SenbeiRoutesTests {
    let routes = AppRoutesTests()

    @Test func tasksWithoutADueDayAreDueAsSoonAsPossible() async throws {
        try await DemoServer.withRunning { server in
            let seeded = try routes.array(try await routes.send(server, .GET, "/tasks").body)
            let undated = seeded.filter { $0["due"] == nil }
            #expect(undated.count == 2, "the seed has two tasks due as soon as possible")

            let created = try await routes.send(server, .POST, "/tasks", json: #"{"name": "Call back"}"#)
            #expect(created.status == 201)
            let task = try routes.object(created.body)
            #expect(task["due"] == nil, "no due day given, none invented: \(created.body)")
        }
    }

    @Test func aPageFarPastTheEndIsEmptyNotACrash() async throws {
        try await DemoServer.withRunning { server in
            let far = try await routes.send(server, .GET, "/contacts?page=\(Int.max)&per_page=100")
            #expect(far.status == 200)
            let page = try routes.object(far.body)
            #expect((page["items"] as? [Any])?.isEmpty == true)
            #expect((page["total"] as? Int ?? 0) > 20, "the list itself is there")
        }
    }

    @Test func aMissingRecordIsExplainedAsABaseError() async throws {
        try await DemoServer.withRunning { server in
            let task = try await routes.send(server, .PUT, "/tasks/999/complete")
            #expect(task.status == 404)
            #expect(((try routes.object(task.body)["errors"] as? [String: Any])?["base"] as? [String]) == ["there is no task 999"])
            let comment = try await routes.send(server, .DELETE, "/comments/999")
            #expect(comment.status == 404)
            #expect(((try routes.object(comment.body)["errors"] as? [String: Any])?["base"] as? [String]) == ["there is no comment 999"])
            let refused = try await routes.send(server, .GET, "/profile", headers: ["Authorization": "Basic " + Data("admin:nope".utf8).base64EncodedString()])
            #expect(((try routes.object(refused.body)["errors"] as? [String: Any])?["base"] as? [String]) == ["bad username or password"])
        }
    }

    @Test func activitiesHaveUniqueIdentifiers() async throws {
        try await DemoServer.withRunning { server in
            let seeded = try routes.array(try await routes.send(server, .GET, "/activities").body)
            #expect(seeded.count == 3)
            _ = try await routes.send(server, .PUT, "/tasks/1/complete")
            _ = try await routes.send(server, .PUT, "/tasks/2/complete")
            _ = try await routes.send(server, .POST, "/contacts", json: #"{"name": "Zoe Quinn"}"#)
            let activities = try routes.array(try await routes.send(server, .GET, "/activities").body)
            let ids = activities.compactMap { $0["id"] as? Int }
            #expect(ids.count == activities.count, "every activity has an integer id")
            #expect(activities.count == 6)
            #expect(Set(ids).count == ids.count, "\(ids)")
        }
    }
}

extension SenbeiRoutesTests {
    @Test func aSearchWithASpaceIsDecoded() async throws {
        try await DemoServer.withRunning { server in
            for encoded in ["ann%20nakamura", "ann+nakamura"] {
                let page = try routes.object(try await routes.send(server, .GET, "/contacts?query=\(encoded)&per_page=100").body)
                let names = (page["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
                #expect(!names.isEmpty, "\(encoded)")
                #expect(names.allSatisfy { $0 == "Ann Nakamura" }, "\(encoded): \(names)")
            }
        }
    }
}
