import CLITestSupport
import DemoServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TimelineKit

/// The interactive view driven through tmux, as a user would: start, see the
/// timeline and the network line, write a post, see it sent, quit with status 0.
@Suite(.timeLimit(.minutes(2)))
struct InteractiveModeTests {
    @Test(.enabled(if: Tmux.path != nil, "tmux is not installed: the interactive view is not tested here"))
    func startPostQuit() async throws {
        let executable = try #require(Executables.url("timeline"), "the timeline executable is not built")
        let folder = try Executables.temporaryFolder("timeline-tmux")
        defer { try? FileManager.default.removeItem(at: folder) }
        let exitFile = folder.appending(path: "exit-status").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let session = "timeline-test-\(UUID().uuidString.prefix(8))"
            try await Tmux.start(session, [executable.path, "--server", server.baseURL.absoluteString, "--cache", folder.appending(path: "cache.sqlite").path], exitFile: exitFile)
            defer { Task { await Tmux.kill(session) } }

            // Given the app started, synced, fetched the avatars and went live
            var pane = try await Tmux.waitForPane(session) { $0.contains("Timeline (30 posts, 30 avatars)") && $0.contains("\nlive · network") }
            #expect(pane.contains("link fast · network"))
            #expect(pane.contains("■ @"))

            // When a post is written and sent, it shows as sent
            try await Tmux.send(session, "p")
            _ = try await Tmux.waitForPane(session) { $0.contains("post>") }
            try await Tmux.send(session, "-l", "hello tmux")
            try await Tmux.send(session, "Enter")
            pane = try await Tmux.waitForPane(session) { $0.contains(#"post "hello tmux": sent as #31"#) }
            #expect(pane.contains("@you  hello tmux"), "the new post is at the top of the list")

            // When q is pressed, the app exits with status 0
            try await Tmux.send(session, "q")
            #expect(try await Tmux.exitStatus(session, exitFile: exitFile) == "0")
        }
    }
}
