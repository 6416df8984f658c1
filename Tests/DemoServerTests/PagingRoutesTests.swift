import AsyncHTTPClient
@testable import DemoServer
import Foundation
import NIOHTTP1
import Testing

/// The paged routes: Timeline's older posts (`before=`) and `/paging/items`
/// in its three shapes and its three faults.
@Suite(.timeLimit(.minutes(1))) struct PagingRoutesTests {
    let routes = AppRoutesTests()

    func ids(_ server: DemoServer, _ path: String) async throws -> [Int] {
        let fetched = try await routes.send(server, .GET, path, headers: [:])
        try #require(fetched.status == 200, "\(path): \(fetched.body)")
        if fetched.body.hasPrefix("[") { return try routes.array(fetched.body).compactMap { $0["id"] as? Int } }
        return try (routes.object(fetched.body)["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }
    }

    @Test func timelineListsOlderPostsBeforeAnID() async throws {
        try await DemoServer.withRunning { server in
            // Given the 30 posts, newest first
            let newest = try await ids(server, "/timeline?limit=10")
            #expect(newest == Array((21...30).reversed()))
            // When the client asks for those before the oldest it has
            let older = try await ids(server, "/timeline?limit=10&before=21")
            // Then it gets the next ten, and at the end nothing
            #expect(older == Array((11...20).reversed()))
            #expect(try await ids(server, "/timeline?limit=50&before=3") == [2, 1])
            #expect(try await ids(server, "/timeline?limit=50&before=1") == [])
            // since= still works, and both together bound the range
            #expect(try await ids(server, "/timeline?since=27") == [30, 29, 28])
            #expect(try await ids(server, "/timeline?since=10&before=13") == [12, 11])
        }
    }

    @Test func pagingItemsComeByCursorPageNumberAndBeforeID() async throws {
        try await DemoServer.withRunning { server in
            let first = try routes.object(try await routes.send(server, .GET, "/paging/items?limit=20", headers: [:]).body)
            let cursor = try #require(first["next_cursor"] as? String)
            #expect(first["total"] as? Int == PagingRoutes.initialCount)
            let byCursor = try await ids(server, "/paging/items?limit=20&cursor=\(cursor)")
            #expect(byCursor == Array((6...25).reversed()))
            #expect(try await ids(server, "/paging/items?limit=20&page=2") == byCursor)
            #expect(try await ids(server, "/paging/items?limit=20&before=26") == byCursor)
            let last = try routes.object(try await routes.send(server, .GET, "/paging/items?limit=20&before=6", headers: [:]).body)
            #expect(!(last["next_cursor"] is String), "no next page after the first item")
            // New items on top shift the numbered pages, not the id-based ones.
            _ = try await routes.send(server, .POST, "/paging/items?count=5", headers: [:])
            #expect(try await ids(server, "/paging/items?limit=20&page=2") == Array((11...30).reversed()))
            #expect(try await ids(server, "/paging/items?limit=20&before=26") == byCursor)
        }
    }

    @Test func pagingItemsMisbehaveOnRequest() async throws {
        try await DemoServer.withRunning { server in
            #expect(try await ids(server, "/paging/items?limit=10&page=3&fault=repeat") == Array((36...45).reversed()))
            let empty = try routes.object(try await routes.send(server, .GET, "/paging/items?limit=10&page=2&fault=empty", headers: [:]).body)
            #expect((empty["items"] as? [Any])?.isEmpty == true)
            #expect(empty["next_cursor"] is String)
            let bad = try routes.object(try await routes.send(server, .GET, "/paging/items?limit=10&fault=badcursor", headers: [:]).body)
            #expect(bad["next_cursor"] as? String == "")
            let malformed = try await routes.send(server, .GET, "/paging/items?cursor=nonsense", headers: [:])
            #expect(malformed.status == 400)
        }
    }
}
