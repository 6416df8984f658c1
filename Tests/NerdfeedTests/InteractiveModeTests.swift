import DemoServer
import Foundation
import Testing

/// The interactive view driven through tmux, as a user would: start, see the
/// items, press r, see "last synced just now", press q, exit code 0.
@Suite(.timeLimit(.minutes(2)))
struct InteractiveModeTests {
    static let tmux: String? = ["/usr/bin/tmux", "/usr/local/bin/tmux", "/opt/homebrew/bin/tmux"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs tmux; only `capture-pane` needs its output.
    @discardableResult
    static func tmux(_ arguments: [String], capture: Bool = false) async throws -> String {
        try await spawn(try #require(tmux), arguments, capture: capture).output
    }

    /// Polls the pane until `condition` holds. This waits for another process
    /// to draw, not for time to pass in the code under test: the poll interval
    /// only bounds how often tmux is asked.
    static func waitForPane(_ session: String, _ condition: (String) -> Bool) async throws -> String {
        var pane = ""
        for _ in 0..<600 {
            pane = try await tmux(["capture-pane", "-p", "-t", session], capture: true)
            if condition(pane) { return pane }
            try await ContinuousClock().sleep(for: .milliseconds(50))
        }
        Issue.record("the pane never matched; it shows:\n\(pane)")
        return pane
    }

    @Test(.enabled(if: tmux != nil, "tmux is not installed: the interactive view is not tested here"))
    func startRefreshQuit() async throws {
        let executable = try #require(CommandLineTests.executable, "the nerdfeed executable is not built")
        let folder = try CommandLineTests.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let exitFile = folder.appending(path: "exit-status").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let session = "nerdfeed-test-\(UUID().uuidString.prefix(8))"
            let command = [
                executable.path, "--feed", server.baseURL.appending(path: "forum/rss").absoluteString,
                "--songs", server.baseURL.absoluteString, "--cache", folder.appending(path: "cache.sqlite").path,
            ].map { "'\($0)'" }.joined(separator: " ")
            try await Self.tmux(["new-session", "-d", "-s", session, "-x", "110", "-y", "30", "\(command); echo $? > '\(exitFile)'"])
            defer { Task { _ = try? await Self.tmux(["kill-session", "-t", session]) } }

            // Given the app started and synced
            var pane = try await Self.waitForPane(session) { $0.contains("Forum (") && $0.contains("last synced") }
            #expect(pane.contains("Top songs"))
            #expect(pane.contains("•"), "unread items are listed")

            // When r is pressed, then the status says it synced just now
            try await Self.tmux(["send-keys", "-t", session, "r"])
            pane = try await Self.waitForPane(session) { $0.contains("last synced just now") }
            #expect(pane.contains("last synced just now"))

            // When enter is pressed, the item's details show and it is marked read
            try await Self.tmux(["send-keys", "-t", session, "Enter"])
            pane = try await Self.waitForPane(session) { $0.contains("marked read") }
            try await Self.tmux(["send-keys", "-t", session, "x"])
            pane = try await Self.waitForPane(session) { $0.contains("✓") }

            // When q is pressed, the app exits with status 0
            try await Self.tmux(["send-keys", "-t", session, "q"])
            _ = try await Self.waitForPane(session) { _ in FileManager.default.fileExists(atPath: exitFile) }
            let status = try String(contentsOfFile: exitFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(status == "0")
        }
    }
}
