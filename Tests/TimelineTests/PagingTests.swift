import CLITestSupport
import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing
import TimelineKit

/// Older posts, a page at a time (`before=ID`), against an in-process depot-server.
@MainActor
@Suite(.timeLimit(.minutes(2)))
struct PagingTests {
    func ids(_ app: TimelineApp) throws -> [Int] {
        try app.entries.performFetch()
        return app.entries.fetchedObjects.map(\.id)
    }

    @Test func olderPostsLoadPageByPageToTheFirstPostThenRefreshShowsTheNewestAlone() async throws {
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let controller = try ServerTests.controller(for: server)
            let store = try #require(controller.store)
            // Given the app with ten posts a page, after its first refresh
            let app = try TimelineApp(controller: controller, waitsForNetwork: false, pageSize: 10)
            await app.refresh()
            #expect(try ids(app) == Array((21...30).reversed()))
            #expect(app.pages.hasMore && app.pages.nextPage == .before(id: 21))

            // When the user asks for older posts until there are none
            await app.loadOlderPosts()
            #expect(try ids(app) == Array((11...30).reversed()))
            await app.loadOlderPosts()
            await app.loadOlderPosts()
            // Then the whole timeline is there once, and the end is known
            #expect(try ids(app) == Array((1...30).reversed()))
            #expect(!app.pages.hasMore && app.pages.pageError == nil)

            // And a refresh after a new post shows the newest page alone
            _ = try await controller.perform(CreatePostDirectly(text: "news"))
            await app.refresh()
            #expect(try ids(app) == Array((22...31).reversed()))
            #expect(try await store.read { db in try TimelinePost.fetchCount(db) } == 10)
            #expect(app.pages.hasMore && app.pages.pageCount == 1)
            _ = await app.shutdown(grace: .zero)
        }
    }

    /// `POST /posts` without the outbox: someone else posting.
    struct CreatePostDirectly: NetworkOperation {
        typealias Output = NetworkResponse
        var text: String
        var request: NetworkRequest { .post("posts", json: ["text": text, "author": "elsewhere"]) }
    }

    @Test func theCommandLineLoadsOlderPagesAndShowsThemOffline() async throws {
        let folder = try Executables.temporaryFolder("timeline-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            // Given a run that loads the newest ten and one page of older posts
            let run = try await CommandLineTests.timeline(["--once", "--page-size", "10", "--older", "1", "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(run.status == 0, "\(run.error)")
            let lines = run.output.split(separator: "\n").map(String.init)
            #expect(lines.filter { $0.hasPrefix("■ @") }.count == 20, "\(run.output)")
            #expect(lines.contains("-- older posts on the server (2 pages loaded)"), "\(run.output)")
        }
        // When it runs again with no network, it shows both pages and says more are on the server
        let offline = try await CommandLineTests.timeline(["--once", "--link", "offline", "--page-size", "10", "--cache", cache])
        #expect(offline.status == 0, "\(offline.error)")
        #expect(offline.output.split(separator: "\n").filter { $0.hasPrefix("■ @") }.count == 20, "\(offline.output)")
        #expect(offline.output.contains("-- older posts on the server (2 pages loaded)"), "\(offline.output)")
        #expect(offline.output.contains("-- offline — showing cached data from "), "\(offline.output)")
    }

    @Test func theHelpNamesTheLoadMoreKeyAndOptions() async throws {
        let help = try await CommandLineTests.timeline(["--help"])
        #expect(help.output.contains("m load older posts"), "\(help.output)")
        #expect(help.output.contains("--page-size") && help.output.contains("--older"))
    }
}
