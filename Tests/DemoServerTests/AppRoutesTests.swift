import AsyncHTTPClient
@testable import DemoServer
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// The Senbei (CRM) and Timeline routes over real HTTP.
@Suite(.timeLimit(.minutes(1))) struct AppRoutesTests {
    static let auth = "Basic " + Data("admin:secret".utf8).base64EncodedString()

    func send(_ server: DemoServer, _ method: HTTPMethod, _ path: String, json: String? = nil, headers: [String: String] = ["Authorization": auth]) async throws -> NerdfeedRoutesTests.Fetched {
        var request = HTTPClientRequest(url: server.baseURL.absoluteString + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.body = .bytes(ByteBuffer(string: json))
            request.headers.add(name: "Content-Type", value: "application/json")
        }
        let response = try await NerdfeedRoutesTests.client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 10 << 20)
        var fields: [String: String] = [:]
        for (name, value) in response.headers { fields[name.lowercased()] = value }
        return .init(status: Int(response.status.code), headers: fields, body: String(buffer: body))
    }

    func object(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    func array(_ text: String) throws -> [[String: Any]] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
    }

    @Test func profileChecksBasicCredentials() async throws {
        try await DemoServer.withRunning { server in
            let good = try await send(server, .GET, "/profile")
            #expect(good.status == 200)
            #expect(try object(good.body)["username"] as? String == "admin")
            let bad = try await send(server, .GET, "/profile", headers: ["Authorization": "Basic " + Data("admin:nope".utf8).base64EncodedString()])
            #expect(bad.status == 401)
            #expect(bad.headers["www-authenticate"]?.hasPrefix("Basic") == true)
            let none = try await send(server, .GET, "/contacts", headers: [:])
            #expect(none.status == 401)
        }
    }

    @Test func listsPaginateAndSearch() async throws {
        try await DemoServer.withRunning { server in
            for kind in SenbeiRoutes.kinds {
                let page = try object(try await send(server, .GET, "/\(kind)?page=2&per_page=10").body)
                #expect((page["items"] as? [Any])?.count == 10, "\(kind)")
                #expect(page["page"] as? Int == 2)
                #expect((page["total"] as? Int ?? 0) >= 40)
            }
            let all = try object(try await send(server, .GET, "/contacts?per_page=100").body)
            let firstName = try #require(((all["items"] as? [[String: Any]])?.first?["name"] as? String)?.split(separator: " ").first)
            let found = try object(try await send(server, .GET, "/contacts?query=\(firstName)&per_page=100").body)
            let names = (found["items"] as? [[String: Any]])?.compactMap { $0["name"] as? String } ?? []
            #expect(!names.isEmpty && names.allSatisfy { $0.contains(firstName) })
        }
    }

    @Test func commentsCanBeListedPostedAndDeleted() async throws {
        try await DemoServer.withRunning { server in
            let posted = try await send(server, .POST, "/comments", json: #"{"commentable_type": "contact", "commentable_id": 3, "comment": "Called, no answer"}"#)
            #expect(posted.status == 201)
            let id = try #require(try object(posted.body)["id"] as? Int)
            let listed = try array(try await send(server, .GET, "/comments?contact_id=3").body)
            #expect(listed.count == 1 && listed.first?["comment"] as? String == "Called, no answer")
            #expect(try await send(server, .DELETE, "/comments/\(id)").status == 204)
            #expect(try array(try await send(server, .GET, "/comments?contact_id=3").body).isEmpty)
            #expect(try await send(server, .DELETE, "/comments/\(id)").status == 404)
            let blank = try await send(server, .POST, "/comments", json: #"{"commentable_type": "contact", "commentable_id": 3, "comment": " "}"#)
            #expect(blank.status == 422)
            #expect(((try object(blank.body)["errors"] as? [String: Any])?["comment"] as? [String])?.first == "can't be blank")
        }
    }

    @Test func tasksSpanTheDueBucketsAndCanBeCompletedAndCreated() async throws {
        try await DemoServer.withRunning(.init(epoch: Date(timeIntervalSince1970: 1_767_225_600))) { server in
            let tasks = try array(try await send(server, .GET, "/tasks").body)
            let dues = Set(tasks.compactMap { $0["due"] as? String })
            #expect(dues.contains("2025-12-29"))  // overdue
            #expect(dues.contains("2026-01-01"))  // today
            #expect(dues.contains("2026-01-02"))  // tomorrow
            #expect(dues.contains("2026-01-31"))  // later
            let id = try #require(tasks.first?["id"] as? Int)
            let done = try await send(server, .PUT, "/tasks/\(id)/complete")
            #expect(try object(done.body)["completed"] as? Bool == true)
            #expect(try array(try await send(server, .GET, "/tasks").body).count == tasks.count - 1)
            let created = try await send(server, .POST, "/tasks", json: #"{"name": "Send quote", "due": "2026-01-05"}"#)
            #expect(created.status == 201)
            let invalid = try await send(server, .POST, "/tasks", json: #"{"name": "", "due": "soon"}"#)
            #expect(invalid.status == 422)
            let errors = try #require(try object(invalid.body)["errors"] as? [String: [String]])
            #expect(errors.keys.sorted() == ["due", "name"])
        }
    }

    @Test func contactsCanBeCreatedAndShowUpInActivities() async throws {
        try await DemoServer.withRunning { server in
            let created = try await send(server, .POST, "/contacts", json: #"{"name": "Zoe Quinn", "email": "zoe@example.com"}"#)
            #expect(created.status == 201)
            let bad = try await send(server, .POST, "/contacts", json: #"{"name": "No Mail", "email": "nope"}"#)
            #expect(bad.status == 422)
            let activities = try array(try await send(server, .GET, "/activities").body)
            #expect(activities.first?["subject"] as? String == "contact Zoe Quinn")
            let first = try object(try await send(server, .GET, "/contacts?per_page=1").body)
            #expect((first["items"] as? [[String: Any]])?.first?["name"] as? String == "Zoe Quinn")
        }
    }

    @Test func timelineIsNewestFirstAndFiltersBySince() async throws {
        try await DemoServer.withRunning { server in
            let posts = try array(try await send(server, .GET, "/timeline", headers: [:]).body)
            let ids = posts.compactMap { $0["id"] as? Int }
            #expect(ids == ids.sorted(by: >))
            let newer = try array(try await send(server, .GET, "/timeline?since=25", headers: [:]).body)
            #expect(newer.compactMap { $0["id"] as? Int } == [30, 29, 28, 27, 26])
        }
    }

    @Test func idempotencyKeyNeverPostsTwice() async throws {
        try await DemoServer.withRunning { server in
            let body = #"{"text": "hello from the tunnel"}"#
            let first = try await send(server, .POST, "/posts", json: body, headers: ["Idempotency-Key": "k-1"])
            #expect(first.status == 201)
            let again = try await send(server, .POST, "/posts", json: body, headers: ["Idempotency-Key": "k-1"])
            #expect(again.status == 201)
            #expect(again.body == first.body)
            #expect(again.headers["idempotent-replayed"] == "true")
            let other = try await send(server, .POST, "/posts", json: #"{"text": "something else"}"#, headers: ["Idempotency-Key": "k-1"])
            #expect(other.status == 422)
            // Every request with the key reached the route, replayed or refused: the server counts them.
            #expect(server.deliveries(ofIdempotencyKey: "k-1") == ["POST /posts": 3])
            let timeline = try array(try await send(server, .GET, "/timeline?since=30", headers: [:]).body)
            #expect(timeline.count == 1)
            let empty = try await send(server, .POST, "/posts", json: #"{"text": ""}"#, headers: [:])
            #expect(empty.status == 422)
        }
    }

    @Test func avatarsAreRealPNGsOfTheConfiguredSize() async throws {
        try await DemoServer.withRunning(.init(avatarBytes: 20_000)) { server in
            var request = HTTPClientRequest(url: server.baseURL.absoluteString + "/avatars/3.png")
            request.method = .GET
            let response = try await NerdfeedRoutesTests.client.execute(request, timeout: .seconds(10))
            let bytes = Array(buffer: try await response.body.collect(upTo: 1 << 20))
            #expect(response.headers["content-type"].first == "image/png")
            #expect(bytes.prefix(8) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
            #expect((18_000...22_000).contains(bytes.count), "\(bytes.count) bytes")
            // Every chunk's CRC is right: a decoder would accept it.
            var offset = 8
            while offset < bytes.count {
                let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
                let typed = Array(bytes[(offset + 4)..<(offset + 8 + length)])
                let crc = bytes[(offset + 8 + length)..<(offset + 12 + length)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                #expect(PNG.crc32(typed) == crc)
                offset += 12 + length
            }
            #expect(offset == bytes.count)
        }
    }
}
