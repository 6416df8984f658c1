import CLITestSupport
import DemoServer
import Foundation
import Testing

/// The interactive view driven through tmux, as a user would: start, see the
/// items, press r, see "last synced just now", press q, exit code 0.
@Suite(.timeLimit(.minutes(2)))
struct InteractiveModeTests {
    @Test(.enabled(if: Tmux.path != nil, "tmux is not installed: the interactive view is not tested here"))
    func startRefreshQuit() async throws {
        let executable = try #require(Executables.url("nerdfeed"), "the nerdfeed executable is not built")
        let folder = try Executables.temporaryFolder("nerdfeed-tmux")
        defer { try? FileManager.default.removeItem(at: folder) }
        let exitFile = folder.appending(path: "exit-status").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let session = "nerdfeed-test-\(UUID().uuidString.prefix(8))"
            try await Tmux.start(session, [
                executable.path, "--feed", server.baseURL.appending(path: "forum/rss").absoluteString,
                "--songs", server.baseURL.absoluteString, "--cache", folder.appending(path: "cache.sqlite").path,
            ], exitFile: exitFile)
            defer { Task { await Tmux.kill(session) } }

            // Given the app started and synced
            var pane = try await Tmux.waitForPane(session) { $0.contains("Forum (") && $0.contains("last synced") }
            #expect(pane.contains("Top songs"))
            #expect(pane.contains("•"), "unread items are listed")

            // When r is pressed, the feed is fetched again and the status says it synced just now
            // (the start-up sync already says "just now", so count the server's requests)
            let feedRequests = { server.currentStats.requests.filter { $0.key.contains("forum/rss") }.values.reduce(0, +) }
            let before = feedRequests()
            try await Tmux.send(session, "r")
            // The one poll of a real process the tests have (Tmux.waitForPane, with its deadline),
            // here watching the server rather than the screen.
            _ = try await Tmux.waitForPane(session) { _ in feedRequests() > before }
            #expect(feedRequests() == before + 1, "r refreshes the feed once")
            pane = try await Tmux.waitForPane(session) { $0.contains("last synced just now") }
            #expect(pane.contains("last synced just now"))

            // When enter is pressed, the item's details show and it is marked read
            try await Tmux.send(session, "Enter")
            pane = try await Tmux.waitForPane(session) { $0.contains("marked read") }
            try await Tmux.send(session, "x")
            pane = try await Tmux.waitForPane(session) { $0.contains("✓") }

            // When q is pressed, the app exits with status 0
            try await Tmux.send(session, "q")
            #expect(try await Tmux.exitStatus(session, exitFile: exitFile) == "0")
        }
    }
}
