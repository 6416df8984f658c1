import CLITestSupport
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
        var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
        configuration.store = try StoreFixtures.temporaryStore(migrator: TimelineSchema.migrator)
        configuration.conditions.rules = TimelineApp.qualityRules
        return NetworkController(configuration: configuration)
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

    /// The pending rows the timeline shows, as `(text, rejection)`.
    static func pending(_ app: TimelineApp) throws -> [String] {
        try app.entries.performFetch()
        return app.entries.fetchedObjects.filter(\.isPending).map { $0.text + ($0.rejection.map { " ✗ \($0)" } ?? "") }
    }

    /// A post shows at once as pending; the server's post replaces the
    /// pending row in one change; a 422 keeps the row with the server's reason.
    @Test func aPostIsPendingThenTheServersPostAndA422SaysWhy() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try Self.controller(for: server)
            let app = try TimelineApp(controller: controller, author: "tester")
            let ticket = try await app.post("Posting from the tunnel.")
            let answer = try await ticket.outcome().get()
            let post = try answer.decode(TimelinePost.self)
            #expect(post.author == "tester")
            let store = try #require(controller.store)
            #expect(try await store.read { db in try TimelinePost.fetchOne(db, key: post.id) } == post)
            #expect(try await store.read { db in try PendingPost.fetchCount(db) } == 0, "the pending row became the server's post")
            try app.entries.performFetch()
            #expect(app.entries.fetchedObjects.first?.id == post.id)

            let refused = try await app.post("")
            guard case .failure(let error) = await refused.outcome() else {
                Issue.record("an empty post was accepted")
                return
            }
            #expect(error.status == 422)
            #expect(error.description == "CreatePost failed: server answered 422 Unprocessable Content (body: \"text must be 1 to 280 characters\")")
            #expect(try Self.pending(app) == [" ✗ text must be 1 to 280 characters"])
            try await app.dismissRejected()
            #expect(try Self.pending(app).isEmpty)
            _ = await app.shutdown(grace: .seconds(1))
        }
    }

    /// Posts written offline show at once and stay queued; once the server is
    /// reachable, they go out in the order written, each exactly once.
    @Test func postsWrittenOfflineGoOutInOrderOnceOnline() async throws {
        let folder = try Executables.temporaryFolder("timeline-outbox")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        do {
            var configuration = NetworkController.Configuration(baseURL: URL(string: "http://127.0.0.1:9")!, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
            let store = try Store(path: path, migrator: TimelineSchema.migrator)
            configuration.store = store
            let app = try TimelineApp(controller: NetworkController(configuration: configuration), author: "tester", waitsForNetwork: false)
            for text in ["first offline", "second offline"] { try await app.post(text) }
            #expect(try Self.pending(app) == ["second offline", "first offline"], "newest on top, at once")
            #expect(await app.sendPending() == 2)
            _ = await app.shutdown(grace: .zero)
            #expect(app.sentPosts.allSatisfy { $0.isQueued })
            try await store.close()
        }
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
            configuration.store = try Store(path: path, migrator: TimelineSchema.migrator)
            let app = try TimelineApp(controller: NetworkController(configuration: configuration), author: "tester", waitsForNetwork: false)
            #expect(await app.sendPending() == 0)
            #expect(try Self.pending(app).isEmpty)
            let texts = try await Self.serverTexts(server)
            #expect(texts.filter { $0.hasSuffix(" offline") } == ["second offline", "first offline"], "in order, once each: \(texts)")
            _ = await app.shutdown(grace: .seconds(1))
        }
    }

    /// The server handles the post, then the connection drops before the
    /// answer: the post is retried with the same key and the server answers
    /// with the first response instead of posting twice.
    @Test func theIdempotencyKeyPreventsADuplicateAfterADroppedConnection() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try Self.controller(for: server)
            let events = controller.events()
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

            let app = try TimelineApp(controller: controller, author: "tester")
            let post = try await app.post("through the tunnel").outcome().get().decode(TimelinePost.self)
            #expect(post.text == "through the tunnel")
            #expect(await retries.value == 1, "the first answer was lost, so it was sent again")
            #expect(try await Self.serverTexts(server).filter { $0 == "through the tunnel" }.count == 1, "posted once")
            _ = await app.shutdown(grace: .seconds(1))
        }
    }
}
