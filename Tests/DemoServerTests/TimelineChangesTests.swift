import AsyncHTTPClient
@testable import DemoServer
import Foundation
import Testing

/// The Timeline's numbered changes over real HTTP: `DELETE /posts/:id`,
/// `GET /timeline/changes` and the `Change-Cursor` of `GET /timeline`.
@Suite(.timeLimit(.minutes(1))) struct TimelineChangesTests {
    let routes = AppRoutesTests()

    func changes(_ server: DemoServer, _ query: String) async throws -> (status: Int, body: [String: Any]) {
        let answer = try await routes.send(server, .GET, "/timeline/changes?\(query)", headers: [:])
        return (answer.status, try routes.object(answer.body))
    }

    func ids(_ server: DemoServer, _ query: String = "") async throws -> [Int] {
        try routes.array(try await routes.send(server, .GET, "/timeline\(query)", headers: [:]).body).compactMap { $0["id"] as? Int }
    }

    @Test func deletingAPostRemovesItOnceAndNeverReusesItsID() async throws {
        try await DemoServer.withRunning { server in
            #expect(try await routes.send(server, .DELETE, "/posts/30", headers: [:]).status == 204)
            #expect(try await ids(server).contains(30) == false)

            let missing = try await routes.send(server, .DELETE, "/posts/30", headers: [:])
            #expect(missing.status == 404)
            #expect(missing.headers["content-type"] == "application/json")
            #expect(((try routes.object(missing.body)["errors"] as? [String: Any])?["base"] as? [String]) == ["there is no post 30"])

            // The next post is 31, not 30 again.
            let created = try await routes.send(server, .POST, "/posts", json: #"{"text": "new"}"#, headers: [:])
            #expect(try routes.object(created.body)["id"] as? Int == 31)

            // With an Idempotency-Key a repeated delete is replayed, not a 404, and is one change.
            let first = try await routes.send(server, .DELETE, "/posts/5", headers: ["Idempotency-Key": "d-5"])
            let again = try await routes.send(server, .DELETE, "/posts/5", headers: ["Idempotency-Key": "d-5"])
            #expect(first.status == 204 && again.status == 204)
            #expect(again.headers["idempotent-replayed"] == "true")
            let page = try await changes(server, "since=0")
            let kinds = (page.body["changes"] as? [[String: Any]])?.compactMap { $0["change"] as? String }
            #expect(kinds == ["delete", "post", "delete"])
        }
    }

    @Test func changesArePagedInOrderWithMore() async throws {
        try await DemoServer.withRunning { server in
            _ = try await routes.send(server, .POST, "/_control", json: #"{"timelineChanges": {"posts": 5, "deletes": 2}}"#, headers: [:])

            let first = try await changes(server, "since=0&limit=3")
            #expect(first.status == 200)
            let entries = try #require(first.body["changes"] as? [[String: Any]])
            #expect(entries.compactMap { $0["seq"] as? Int } == [1, 2, 3])
            #expect(entries.allSatisfy { $0["change"] as? String == "post" })
            #expect((entries.first?["post"] as? [String: Any])?["id"] as? Int == 31)
            #expect(Set((entries.first?["post"] as? [String: Any] ?? [:]).keys) == ["id", "author", "text", "avatar"])
            #expect(first.body["cursor"] as? Int == 3)
            #expect(first.body["more"] as? Bool == true)

            let last = try await changes(server, "since=3&limit=10")
            let rest = try #require(last.body["changes"] as? [[String: Any]])
            #expect(rest.compactMap { $0["seq"] as? Int } == [4, 5, 6, 7])
            #expect(rest.suffix(2).allSatisfy { $0["change"] as? String == "delete" && $0["id"] is Int && $0["post"] == nil })
            #expect(last.body["cursor"] as? Int == 7)
            #expect(last.body["more"] as? Bool == false)

            let empty = try await changes(server, "since=7")
            #expect((empty.body["changes"] as? [Any])?.isEmpty == true)
            #expect(empty.body["cursor"] as? Int == 7)
            #expect(empty.body["more"] as? Bool == false)
        }
    }

    @Test func aSinceTheServerNoLongerKeepsIsGoneAndABadOneIsRefused() async throws {
        try await DemoServer.withRunning(.init(changeHistory: 2)) { server in
            _ = try await routes.send(server, .POST, "/_control", json: #"{"timelineChanges": {"posts": 5}}"#, headers: [:])
            #expect(try await changes(server, "since=3").status == 200)
            for since in ["2", "0", "6"] {
                let gone = try await changes(server, "since=\(since)")
                #expect(gone.status == 410, "since=\(since)")
                #expect((gone.body["errors"] as? [String: Any])?["since"] is [String])
            }
            for query in ["", "since=abc", "since=-1", "limit=5"] {
                let bad = try await changes(server, query)
                #expect(bad.status == 400, "\(query)")
                #expect((bad.body["errors"] as? [String: Any])?["since"] is [String])
            }
            // A larger history at runtime keeps more from then on.
            _ = try await routes.send(server, .POST, "/_control", json: #"{"changeHistory": 100, "timelineChanges": {"posts": 3}}"#, headers: [:])
            #expect(try await changes(server, "since=5").status == 200)
        }
    }

    @Test func theChangeCursorIsTheSnapshotsOwnNumber() async throws {
        try await DemoServer.withRunning(.init(timelinePosts: 0, changeHistory: 20_000)) { server in
            let initial = try await routes.send(server, .GET, "/timeline", headers: [:])
            #expect(initial.headers["change-cursor"] == "0")
            #expect(initial.body == "[]")

            // While posts are made one by one, every snapshot has exactly as many posts as its cursor says.
            let routes = routes
            async let making: Void = {
                for index in 0..<200 {
                    _ = try await routes.send(server, .POST, "/posts", json: #"{"text": "post \#(index)"}"#, headers: [:])
                }
            }()
            for _ in 0..<50 {
                let snapshot = try await routes.send(server, .GET, "/timeline?limit=100000", headers: [:])
                let cursor = try #require(snapshot.headers["change-cursor"].flatMap { Int($0) })
                #expect(try routes.array(snapshot.body).count == cursor)
            }
            try await making
            _ = try await routes.send(server, .POST, "/_control", json: #"{"timelineChanges": {"posts": 4800}}"#, headers: [:])
            let full = try await routes.send(server, .GET, "/timeline?limit=100000", headers: [:])
            #expect(full.headers["change-cursor"] == "5000")
            #expect(try routes.array(full.body).count == 5000, "the limit goes past the old cap of 200")
        }
    }

    @Test func aCursorFromTheListResumesTheStreamWithNothingMissed() async throws {
        try await DemoServer.withRunning { server in
            _ = try await routes.send(server, .POST, "/posts", json: #"{"text": "one"}"#, headers: [:])
            let snapshot = try await routes.send(server, .GET, "/timeline", headers: [:])
            let cursor = try #require(snapshot.headers["change-cursor"])
            #expect(cursor == "1")
            // A change between the fetch and the stream
            let between = try await routes.send(server, .POST, "/posts", json: #"{"text": "between"}"#, headers: [:])
            var stream = try await EventStreamReader.open(server, "/timeline/events", headers: ["Last-Event-ID": cursor])
            #expect(try await stream.next() == "id: 2\nevent: post\ndata: \(between.body)\n\n")
        }
    }

    @Test func theInitialPostCountIsConfigurable() async throws {
        try await DemoServer.withRunning(.init(timelinePosts: 250)) { server in
            let all = try await ids(server, "?limit=1000")
            #expect(all == Array((1...250).reversed()))
            #expect(try await ids(server, "?since=240&before=245") == [244, 243, 242, 241])
        }
    }
}
