import CLITestSupport
import DemoServer
import Foundation
import Testing

/// The interactive search driven through tmux, as a user would: type, see the
/// matches follow, delete, quit.
@Suite(.timeLimit(.minutes(2)))
struct InteractiveSearchTests {
    @Test(.enabled(if: Tmux.path != nil, "tmux is not installed: the interactive search is not tested here"))
    func typeToSearchThenQuit() async throws {
        let executable = try #require(Executables.url("senbei"), "the senbei executable is not built")
        let folder = try Executables.temporaryFolder("senbei-tmux")
        defer { try? FileManager.default.removeItem(at: folder) }
        let exitFile = folder.appending(path: "exit-status").path
        try await DemoServer.withRunning(.init(port: 0, seed: 1)) { server in
            let session = "senbei-test-\(UUID().uuidString.prefix(8))"
            try await Tmux.start(session, [
                executable.path, "search", "--server", server.baseURL.absoluteString,
                "--cache", folder.appending(path: "cache.sqlite").path,
            ], exitFile: exitFile)
            defer { Task { await Tmux.kill(session) } }

            // Given the search is open and signed in
            var pane = try await Tmux.waitForPane(session) { $0.contains("Type a name") }
            #expect(pane.contains("signed in as Admin User"))

            // When "ann" is typed key by key, the matches for "ann" show
            for key in ["a", "n", "n"] { try await Tmux.send(session, key) }
            pane = try await Tmux.waitForPane(session) { $0.contains("contacts match \"ann\"") }
            #expect(pane.contains("Search: ann"))
            #expect(pane.contains("Ann "))

            // When one more letter narrows it, the list follows
            try await Tmux.send(session, " ", "n", "a", "k")
            pane = try await Tmux.waitForPane(session) { $0.contains("match \"ann nak\"") }
            #expect(pane.contains("Ann Nakamura"))
            #expect(!pane.contains("Ann Moreau"))

            // When the query is deleted, then q quits with status 0
            for _ in 0..<7 { try await Tmux.send(session, "BSpace") }
            pane = try await Tmux.waitForPane(session) { $0.contains("Type a name") }
            try await Tmux.send(session, "q")
            #expect(try await Tmux.exitStatus(session, exitFile: exitFile) == "0")
        }
    }
}
