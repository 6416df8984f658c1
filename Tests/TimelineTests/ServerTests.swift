import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GRDB
import Testing
import TimelineKit

/// The Timeline operations over real HTTP against an in-process depot-server,
/// with a real SQLite file.
@MainActor
@Suite(.timeLimit(.minutes(2)))
struct ServerTests {
    /// A controller on AsyncHTTPClient with a fresh Timeline store, for `server`.
    static func controller(for server: DemoServer) throws -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), notificationCenter: nil)
        configuration.store = try StoreFixtures.temporaryStore(migrator: TimelineSchema.migrator)
        configuration.monitor = TimelineApp.monitorConfiguration
        configuration.qualityRules = TimelineApp.qualityRules
        return NetworkController(configuration: configuration)
    }

    /// The server's requests for one route, such as `POST /posts`.
    static func requests(_ route: String, on server: DemoServer) async throws -> Int {
        let (data, _) = try await URLSession.shared.data(from: server.baseURL.appending(path: "_stats"))
        let stats = try JSONDecoder().decode(DemoServer.Stats.self, from: data)
        return stats.requests[route, default: 0]
    }

    /// The texts on the server's timeline.
    static func serverTexts(_ server: DemoServer) async throws -> [String] {
        let (data, _) = try await URLSession.shared.data(from: server.baseURL.appending(path: "timeline").appending(queryItems: [URLQueryItem(name: "limit", value: "200")]))
        return try JSONDecoder().decode([TimelinePost].self, from: data).map(\.text)
    }

    @Test func fetchTimelineMergesPosts() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try Self.controller(for: server)
            let first = try await controller.perform(FetchTimeline())
            #expect(first.written == 30)
            let store = try #require(controller.store)
            let count = try await store.read { db in try TimelinePost.fetchCount(db) }
            #expect(count == 30)
            let again = try await controller.perform(FetchTimeline())
            #expect(again.written == 0 || again.written == nil, "nothing new, nothing duplicated")
            #expect(try await store.read { db in try TimelinePost.fetchCount(db) } == 30)
            _ = await controller.shutdown(grace: .seconds(1))
        }
    }

    @Test func avatarsArePNGFilesOrNothing() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try Self.controller(for: server)
            _ = try await controller.perform(FetchAvatar(path: "/avatars/3.png"))
            let store = try #require(controller.store)
            let png = try await store.read { db in try AvatarImage.fetchOne(db, key: "/avatars/3.png") }?.png
            #expect(png?.starts(with: [0x89, 0x50, 0x4E, 0x47]) == true)
            #expect((png?.count ?? 0) > 10_000)

            // A body that is not a PNG file fails with .decoding and stores nothing.
            let error = await #expect(throws: DepotError.self) { try await controller.perform(FetchAvatar(path: "/faults/bytes/500")) }
            #expect(error?.code == .decoding)
            #expect(try await store.read { db in try AvatarImage.fetchCount(db) } == 1)
            _ = await controller.shutdown(grace: .seconds(1))
        }
    }

    @Test func aPostIsCachedAndA422SaysWhy() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try Self.controller(for: server)
            let post = try await controller.perform(CreatePost(text: "Posting from the tunnel.", author: "tester", idempotencyKey: "k-1"))
            #expect(post.author == "tester")
            let store = try #require(controller.store)
            #expect(try await store.read { db in try TimelinePost.fetchOne(db, key: post.id) } == post)

            let error = await #expect(throws: DepotError.self) { try await controller.perform(CreatePost(text: "", idempotencyKey: "k-2")) }
            #expect(error?.status == 422)
            #expect(error?.description == "CreatePost failed: server answered 422 Unprocessable Content (body: \"text must be 1 to 280 characters\")")
            _ = await controller.shutdown(grace: .seconds(1))
        }
    }

    /// A double press sends one request: the second press of the same draft
    /// joins the first. A third press after it went out gets the same post
    /// back from the server; only a new draft is a new post.
    @Test func aDoublePressPostsOnce() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try Self.controller(for: server)
            let app = try TimelineApp(controller: controller, author: "tester")
            let draft = TimelineApp.Draft(text: "only once")
            let first = app.post(draft)
            let second = app.post(draft)
            #expect(first.id != second.id)
            await app.waitForPosts()
            #expect(try await Self.requests("POST /posts", on: server) == 1, "the second press joined the first request")

            app.post(draft)
            await app.waitForPosts()
            let ids = app.sentPosts.compactMap { if case .sent(let post) = $0.state { post.id } else { nil } }
            #expect(ids.count == 3 && Set(ids).count == 1, "every press got the same post: \(ids)")
            #expect(try await Self.requests("POST /posts", on: server) == 2)
            #expect(try await Self.serverTexts(server).filter { $0 == "only once" }.count == 1, "the server replayed its first answer")

            // A new draft with the same words is a new post.
            app.post("only once")
            await app.waitForPosts()
            #expect(try await Self.serverTexts(server).filter { $0 == "only once" }.count == 2)
            _ = await app.shutdown(grace: .seconds(1))
        }
    }

    /// The server handles the post, then the connection drops before the
    /// answer: the post is retried with the same key and the server answers
    /// with the first response instead of posting twice.
    @Test func theIdempotencyKeyPreventsADuplicateAfterADroppedConnection() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try Self.controller(for: server)
            let events = controller.events
            let retries = Task {
                var count = 0
                for await event in events {
                    if event.kind == .retried { count += 1 }
                    if event.kind == .finished, event.operation == "CreatePost" { return count }
                }
                return count
            }
            var control = URLRequest(url: server.baseURL.appending(path: "_control"))
            control.httpMethod = "POST"
            control.httpBody = Data(#"{"route": "/posts", "dropResponses": 1}"#.utf8)
            _ = try await URLSession.shared.data(for: control)

            let post = try await controller.perform(CreatePost(text: "through the tunnel", author: "tester", idempotencyKey: "draft-1"))
            #expect(post.text == "through the tunnel")
            #expect(await retries.value == 1, "the first answer was lost, so it was sent again")
            #expect(try await Self.serverTexts(server).filter { $0 == "through the tunnel" }.count == 1, "posted once")
            _ = await controller.shutdown(grace: .seconds(1))
        }
    }
}
