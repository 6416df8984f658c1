import Foundation
import Testing

/// The package's built executables and scratch folders, for tests that run a
/// command-line app as a user runs it.
public enum Executables {
    /// The package's root, found from this file.
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The built executable `name`: `swift test` builds the package's executables with the tests.
    public static func url(_ name: String) -> URL? {
        let folders = [".build/debug", ".build/x86_64-unknown-linux-gnu/debug", ".build/arm64-apple-macosx/debug", ".build/aarch64-unknown-linux-gnu/debug"]
        return folders.map { root.appending(path: "\($0)/\(name)") }.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// Runs the executable `name` with `arguments` and waits for it (or kills
    /// it with SIGKILL after `killAfter`); records an issue and throws when it is not built.
    public static func run(_ name: String, _ arguments: [String], environment: [String: String] = [:], killAfter: Duration? = nil) async throws -> ChildResult {
        guard let executable = url(name) else {
            Issue.record("the \(name) executable is not built")
            throw SpawnError(description: "the \(name) executable is not built")
        }
        return try await spawn(executable.path, arguments, environment: environment, killAfter: killAfter)
    }

    /// Runs `name` with each bad argument list and checks that it refuses
    /// it as a user error: exit status 64, and `message` in one line of
    /// standard error. Never a crash (a signal), never a hang.
    public static func refuses(_ name: String, _ table: [(arguments: [String], message: String)], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for (arguments, message) in table {
            let run = try await run(name, arguments)
            #expect(run.status == 64, "\(name) \(arguments.joined(separator: " ")): status \(run.status), \(run.error)", sourceLocation: sourceLocation)
            #expect(run.error.contains(message), "\(name) \(arguments.joined(separator: " ")): \(run.error)", sourceLocation: sourceLocation)
        }
    }

    /// A new empty folder under the temporary directory.
    public static func temporaryFolder(_ prefix: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appending(path: "\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }
}

/// tmux, for driving an interactive view as a user would.
public enum Tmux {
    /// tmux's path, or `nil` where it is not installed.
    public static let path: String? = ["/usr/bin/tmux", "/usr/local/bin/tmux", "/opt/homebrew/bin/tmux"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Runs tmux; only `capture-pane` needs its output.
    @discardableResult
    public static func run(_ arguments: [String], capture: Bool = false) async throws -> String {
        try await spawn(try #require(path), arguments, capture: capture).output
    }

    /// Starts `command` (its words quoted) in a new detached session of the
    /// given size; when it ends, its exit status is written to `exitFile`.
    public static func start(_ session: String, _ command: [String], exitFile: String, columns: Int = 110, rows: Int = 30) async throws {
        let line = command.map { "'\($0)'" }.joined(separator: " ")
        try await run(["new-session", "-d", "-s", session, "-x", "\(columns)", "-y", "\(rows)", "\(line); echo $? > '\(exitFile)'"])
    }

    /// Types `keys` into the session (tmux key names, such as `Enter`).
    public static func send(_ session: String, _ keys: String...) async throws {
        try await run(["send-keys", "-t", session] + keys)
    }

    /// Polls the pane until `condition` holds. This waits for another process
    /// to draw, not for time to pass in the code under test: the poll interval
    /// only bounds how often tmux is asked.
    public static func waitForPane(_ session: String, _ condition: (String) -> Bool) async throws -> String {
        var pane = ""
        for _ in 0..<600 {
            pane = try await run(["capture-pane", "-p", "-t", session], capture: true)
            if condition(pane) { return pane }
            try await ContinuousClock().sleep(for: .milliseconds(50))
        }
        Issue.record("the pane never matched; it shows:\n\(pane)")
        return pane
    }

    /// Waits for the command started by ``start(_:_:exitFile:columns:rows:)``
    /// to end and returns its exit status.
    public static func exitStatus(_ session: String, exitFile: String) async throws -> String {
        func status() -> String? {
            (try? String(contentsOfFile: exitFile, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        _ = try await waitForPane(session) { _ in status()?.isEmpty == false }
        return status() ?? ""
    }

    /// Ends the session, ignoring failures (it may have ended already).
    public static func kill(_ session: String) async {
        _ = try? await run(["kill-session", "-t", session])
    }
}
