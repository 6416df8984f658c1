#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLITestSupport
import DemoServer
import DepotTesting
import Foundation
import Testing

/// `senbei watch --json`, run as a user runs it against a server others
/// change: it prints their changes as they happen, and goes on after a
/// restart from where it stopped.
@Suite(.timeLimit(.minutes(2)))
struct WatchCommandTests {
    /// A running `senbei watch --json` with its output and errors recorded.
    struct Watch {
        let child: LiveChild
        let output: Recorder<String>
        let errors: Recorder<String>

        init(server: DemoServer, folder: URL) throws {
            let executable = try #require(Executables.url("senbei"), "the senbei executable is not built")
            child = try LiveChild.start(executable.path, ["watch", "--json", "--server", server.baseURL.absoluteString, "--cache", folder.appending(path: "cache.sqlite").path])
            output = Recorder(child.output, timeout: .seconds(30))
            errors = Recorder(child.errors, timeout: .seconds(30))
        }

        /// Waits until it says it is live: the first sync is done, and what
        /// changes from now on will be printed.
        func live() async throws {
            _ = try await errors.next { $0.hasPrefix("senbei: live") }
        }

        /// The next `count` lines, each one JSON object.
        func changes(_ count: Int) async throws -> [[String: Any]] {
            var objects: [[String: Any]] = []
            for _ in 0..<count {
                let line = try await output.next()
                objects.append(try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)"))
            }
            return objects
        }

        /// Waits for the end and returns the exit status and every line printed.
        func end() async throws -> (status: Int32, lines: [String]) {
            let status = await child.exitStatus()
            // Standard output ends with the process: the wait fails at once at its end.
            while (try? await output.next()) != nil {}
            #expect(output.isFinished)
            return (status, output.values)
        }
    }

    static func makeChanges(_ server: DemoServer, contacts: Int, tasks: Int) async throws {
        try await ServerControl.send(to: server, crmChanges: .init(contacts: contacts, tasks: tasks))
    }

    /// The `(change, name)` of each JSON object.
    static func summary(_ objects: [[String: Any]]) -> [String] {
        objects.map { "\($0["change"] as? String ?? "?") \($0["name"] as? String ?? "?")" }
    }

    @Test func watchPrintsOthersChangesThenResumesAfterARestart() async throws {
        let folder = try Executables.temporaryFolder("senbei-watch")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            // Given a first run, live after its silent full sync
            let first = try Watch(server: server, folder: folder)
            try await first.live()

            // When others make three changes, it prints three JSON lines
            try await Self.makeChanges(server, contacts: 2, tasks: 1)
            let seen = try await first.changes(3)
            #expect(Self.summary(seen) == ["contact Contact 10001", "contact Contact 10002", "task Task 10003"])
            #expect(seen.map { $0["id"] as? Int } == [10001, 10002, 10003])
            #expect(seen.last?["completed"] as? Bool == false)

            // And control-C ends it cleanly, having printed only those
            first.child.send(SIGINT)
            let firstEnd = try await first.end()
            #expect(firstEnd.status == 0, "\(first.errors.values)")
            #expect(firstEnd.lines.count == 3)

            // When two more changes are made while it is not running
            try await Self.makeChanges(server, contacts: 1, tasks: 1)
            let second = try Watch(server: server, folder: folder)

            // Then the next run prints exactly those two, from the cursor it kept
            let missed = try await second.changes(2)
            #expect(Self.summary(missed) == ["contact Contact 10004", "task Task 10005"])
            try await second.live()
            second.child.closeInput()
            let secondEnd = try await second.end()
            #expect(secondEnd.status == 0, "\(second.errors.values)")
            #expect(secondEnd.lines.count == 2, "\(secondEnd.lines)")
        }
    }
}
