import CLITestSupport
import DemoServer
import Foundation
import Testing

/// The `senbei` executable, run as a user runs it, against an in-process server.
@Suite(.timeLimit(.minutes(2)))
struct CommandLineTests {
    /// Runs senbei against `server` with a cache in `folder`.
    static func senbei(_ arguments: [String], server: DemoServer, folder: URL) async throws -> ChildResult {
        // The server seeds due days in UTC; the CLI buckets in the local zone: make them one.
        try await Executables.run("senbei", arguments + ["--server", server.baseURL.absoluteString, "--cache", folder.appending(path: "cache.sqlite").path], environment: ["TZ": "UTC"])
    }

    static func requests(_ server: DemoServer, _ route: String) -> Int {
        server.currentStats.requests.filter { $0.key.contains(route) }.values.reduce(0, +)
    }

    @Test func pageTwoComesFromTheCacheTheSecondTime() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            let first = try await Self.senbei(["contacts", "--page", "2"], server: server, folder: folder)
            #expect(first.status == 0, "\(first.error)")
            let lines = first.output.split(separator: "\n")
            #expect(lines.first?.hasPrefix("Contacts · page 2 of 3") == true, "\(first.output)")
            #expect(lines.first?.hasSuffix("from the server") == true)
            #expect(lines.count == 21)
            #expect(lines.dropFirst().first?.contains("#21") == true)

            let second = try await Self.senbei(["contacts", "--page", "2"], server: server, folder: folder)
            #expect(second.status == 0, "\(second.error)")
            #expect(second.output.split(separator: "\n").first?.contains("from the cache, synced just now") == true, "\(second.output)")
            #expect(second.output.split(separator: "\n").dropFirst() == lines.dropFirst())

            // One sign-in and one list request in all: the second run made none
            #expect(Self.requests(server, "GET /contacts") == 1)
            #expect(Self.requests(server, "GET /profile") == 1)

            let refreshed = try await Self.senbei(["contacts", "--page", "2", "--refresh"], server: server, folder: folder)
            #expect(refreshed.output.split(separator: "\n").first?.hasSuffix("from the server") == true)
            #expect(Self.requests(server, "GET /contacts") == 2)
        }
    }

    @Test func aValidationErrorIsTheServersSentenceAndExitsNonZero() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            let run = try await Self.senbei(["new-task", " "], server: server, folder: folder)
            #expect(run.status == 1)
            #expect(run.output.isEmpty)
            #expect(run.error == "senbei: Not saved: name can't be blank.\n")

            let missing = try await Self.senbei(["done", "999"], server: server, folder: folder)
            #expect(missing.status == 1)
            #expect(missing.error == "senbei: There is no task 999.\n")
        }
    }

    @Test func aBadPasswordWithoutATerminalExitsWithOneSentence() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            let run = try await Self.senbei(["login", "--password", "wrong"], server: server, folder: folder)
            #expect(run.status == 1)
            #expect(run.error == "senbei: Login failed: the server refused user \"admin\" with that password; try --user and --password.\n")
            let good = try await Self.senbei(["login"], server: server, folder: folder)
            #expect(good.status == 0, "\(good.error)")
            #expect(good.output.contains("as Admin User (admin, admin@example.com)"))
        }
    }

    @Test func anUnreachableServerIsOneSentence() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        // Port 1 (tcpmux) has no listener here: the connection is refused at once.
        let url = try #require(URL(string: "http://127.0.0.1:1"))
        let run = try await Executables.run("senbei", ["tasks", "--server", url.absoluteString, "--cache", folder.appending(path: "c.sqlite").path])
        #expect(run.status == 1)
        #expect(run.error == "senbei: Cannot reach the Senbei server at \(url.absoluteString).\n")
    }

    @Test func tasksSearchCommentsAndChanges() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7, epoch: Date())) { server in
            // Tasks, under their buckets
            let tasks = try await Self.senbei(["tasks"], server: server, folder: folder)
            #expect(tasks.status == 0, "\(tasks.error)")
            for heading in ["Overdue (2)", "Due ASAP (2)", "Today (2)", "Tomorrow (1)", "Later"] {
                #expect(tasks.output.contains(heading), "\(heading) in \(tasks.output)")
            }

            // Search
            let search = try await Self.senbei(["search", "ann"], server: server, folder: folder)
            #expect(search.status == 0, "\(search.error)")
            let found = Int(search.output.prefix { $0.isNumber }) ?? 0
            #expect(found > 0 && search.output.contains("\"ann\""), "\(search.output)")
            #expect(search.output.split(separator: "\n").dropFirst().allSatisfy { $0.lowercased().contains("ann") }, "\(search.output)")

            // Comment, list, delete
            let posted = try await Self.senbei(["comment", "--contact", "3", "Called, no answer"], server: server, folder: folder)
            #expect(posted.status == 0, "\(posted.error)")
            let id = try #require(posted.output.split(separator: "#").last?.split(separator: " ").first.flatMap { Int($0) }, "\(posted.output)")
            let listed = try await Self.senbei(["comments", "--contact", "3"], server: server, folder: folder)
            #expect(listed.output.contains("#\(id)") && listed.output.contains("Called, no answer"), "\(listed.output)")
            let deleted = try await Self.senbei(["uncomment", "\(id)"], server: server, folder: folder)
            #expect(deleted.output == "Deleted comment #\(id).\n")
            let none = try await Self.senbei(["comments", "--contact", "3"], server: server, folder: folder)
            #expect(none.output == "No comments on contact 3.\n")

            // New task, new contact, done, and the activity stream that tells it all
            let task = try await Self.senbei(["new-task", "Send the contract", "--due", "2030-01-02"], server: server, folder: folder)
            #expect(task.output.hasSuffix("Send the contract, due 2030-01-02.\n"), "\(task.output)")
            let contact = try await Self.senbei(["new-contact", "Zoe Quinn", "--email", "zoe@example.com"], server: server, folder: folder)
            #expect(contact.output.hasSuffix("Zoe Quinn.\n"), "\(contact.output)")
            let done = try await Self.senbei(["done", "1"], server: server, folder: folder)
            #expect(done.output.hasPrefix("Done: #1 "), "\(done.output)")
            let activities = try await Self.senbei(["activities"], server: server, folder: folder)
            let lines = activities.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
            #expect(lines.prefix(3).map { $0.split(separator: " ").first.map(String.init) ?? "" } == ["completed", "created", "created"], "\(activities.output)")
            #expect(lines.contains("created contact Zoe Quinn"))
        }
    }

    /// A task name holding escapes (a careless user, a hostile server) is
    /// printed visibly, never as controls: when it is made and in the list.
    @Test func aTaskNameWithEscapesIsPrintedHarmlessly() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            let created = try await Self.senbei(["new-task", "\u{1B}[2JEvil \u{9B}31m\u{202E}task"], server: server, folder: folder)
            #expect(created.status == 0, "\(created.error)")
            #expect(terminalControls(in: created.output + created.error).isEmpty, "\(created.output)")
            let tasks = try await Self.senbei(["tasks"], server: server, folder: folder)
            #expect(tasks.status == 0, "\(tasks.error)")
            #expect(terminalControls(in: tasks.output).isEmpty)
            #expect(tasks.output.contains("␛[2JEvil \u{FFFD}31mtask"), "\(tasks.output)")
        }
    }

    /// The issue's end-to-end check as a user runs it, against 2-second tokens:
    /// ten one-shot runs (each signs in and fetches a page, renewing its token
    /// only if the run outlives half of it) never ask to sign in again and
    /// never fail a page. Refreshes across one session's ten pages are
    /// `TokenSessionTests`' job, on manual clocks: a run here is too short to
    /// need one, now that a short token is not refreshed before every request.
    @Test func twoSecondTokensNeverStopAPage() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7, tokenLifetime: .seconds(2))) { server in
            for run in 0..<10 {
                let list = run.isMultiple(of: 2) ? "contacts" : "leads"
                let result = try await Self.senbei([list, "--page", "\(run / 2 % 3 + 1)", "--refresh"], server: server, folder: folder)
                #expect(result.status == 0 && result.error.isEmpty, "\(result.error)")
                #expect(result.output.split(separator: "\n").first?.hasSuffix("from the server") == true, "\(result.output)")
            }
            let grants = server.currentStats.tokenGrants
            #expect(grants["password"] == 10, "one sign-in per run: \(grants)")
            #expect((grants["refresh_token"] ?? 0) <= 10, "at most one renewal a run: \(grants)")
        }
    }

    /// Bad numbers are one clear sentence, exit 64, before any request.
    @Test func badArgumentsAreRefusedInOneSentence() async throws {
        try await Executables.refuses("senbei", [
            (["contacts", "--page", "-1"], "--page must be at least 1"),
            (["leads", "--page", "0"], "--page must be at least 1"),
            (["contacts", "--more", "--page", "2"], "--more goes on from the pages loaded so far and takes no --page"),
            (["contacts", "--page", "two"], "The value 'two' is invalid for '--page <page>'"),
            (["done", "abc"], "The value 'abc' is invalid for '<id>'"),
            (["comments"], "name one record"),
            (["tasks", "--bogus"], "Unknown option '--bogus'"),
        ])
    }

}

/// The scalars of `text` a terminal would act on (newlines aside).
func terminalControls(in text: String) -> [String] {
    text.unicodeScalars.filter { scalar in
        (scalar.value < 0x20 && scalar != "\n") || (0x7F...0x9F).contains(scalar.value)
            || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
    }.map { String($0.value, radix: 16) }
}

/// Two users' caches, one server: an edit made offline meets another user's
/// edit of the same field, and the CLI lists the conflict and resolves it.
@Suite(.timeLimit(.minutes(2)))
struct ConflictCommandLineTests {
    static func senbei(_ arguments: [String], server: String, folder: URL) async throws -> ChildResult {
        try await Executables.run("senbei", arguments + ["--server", server, "--cache", folder.appending(path: "cache.sqlite").path], environment: ["TZ": "UTC"])
    }

    @Test func anOfflineEditThatMeetsAnotherUsersIsListedMarkedAndResolved() async throws {
        let (mine, theirs) = (try Executables.temporaryFolder("senbei-mine"), try Executables.temporaryFolder("senbei-theirs"))
        defer { for folder in [mine, theirs] { try? FileManager.default.removeItem(at: folder) } }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            let url = server.baseURL.absoluteString
            for folder in [mine, theirs] { _ = try await Self.senbei(["contacts"], server: url, folder: folder) }

            // Offline: stored with the version the cache holds.
            let offline = try await Self.senbei(["edit-contact", "1", "--email", "mine@a.example", "--phone", "555-0101"], server: "http://127.0.0.1:9", folder: mine)
            #expect(offline.status == 0, "\(offline.error)")
            #expect(offline.output == "The edit of contact #1 queued: will be sent when online (outbox entry #1).\n")
            // Another user changes the same field (with an escape sequence in it).
            let other = try await Self.senbei(["edit-contact", "1", "--email", "the\u{1B}[31mirs@b.example"], server: url, folder: theirs)
            #expect(other.status == 0 && other.output.hasPrefix("Saved contact #1"), "\(other.output)\(other.error)")

            // Back online: sent (a run's end waits for its sends), refused (412), kept as a conflict.
            let online = try await Self.senbei(["contacts", "--refresh"], server: url, folder: mine)
            #expect(online.status == 0, "\(online.error)")
            let back = try await Self.senbei(["contacts"], server: url, folder: mine)
            let row = try #require(back.output.split(separator: "\n").first { $0.contains("#1 ") })
            #expect(row.hasSuffix("⚠ conflict"), "\(back.output)")
            let listed = try await Self.senbei(["conflicts"], server: url, folder: mine)
            let lines = listed.output.split(separator: "\n").map(String.init)
            #expect(lines.first == "1 edit in conflict (resolve each with --keep-mine ID, --keep-theirs ID or --set ID FIELD VALUE):")
            #expect(lines.dropFirst().first == "  #1 contact #1 email: ines.haddad@example.com → mine@a.example | the␛[31mirs@b.example", "\(listed.output)")
            #expect(!listed.output.contains("\u{1B}"), "an escape reached the terminal")

            // Wrong arguments: one sentence each.
            let unknownField = try await Self.senbei(["conflicts", "--set", "1", "nickname", "x"], server: url, folder: mine)
            #expect(unknownField.status != 0 && unknownField.error.contains("nickname is not a contact field"), "\(unknownField.error)")
            let noConflict = try await Self.senbei(["conflicts", "--keep-mine", "7"], server: url, folder: mine)
            #expect(noConflict.status == 1 && noConflict.error == "senbei: Cannot resolve: outbox entry #7 has no conflict to resolve.\n", "\(noConflict.error)")

            // Resolved with a value of the user's choosing: the other field (the phone) is still theirs to merge.
            let set = try await Self.senbei(["conflicts", "--set", "1", "email", "both@ab.example"], server: url, folder: mine)
            #expect(set.status == 0, "\(set.error)")
            #expect(set.output == "Conflict #1: your values, with email set, go to the server again, on its version.\n", "\(set.output)")
            let after = try await Self.senbei(["conflicts"], server: url, folder: mine)
            #expect(after.output == "No conflicts: every edit reached the server or waits to be sent.\n")
            let final = try await Self.senbei(["contacts", "--refresh"], server: url, folder: theirs)
            let contact = try #require(final.output.split(separator: "\n").first { $0.contains("#1 ") })
            #expect(contact.contains("both@ab.example"), "\(final.output)")
            // An edit that changes nothing is refused in the app's words.
            let same = try await Self.senbei(["edit-contact", "1", "--email", "both@ab.example"], server: url, folder: mine)
            #expect(same.status == 1 && same.error == "senbei: Not saved: the edit changes nothing: contact #1 already has those values.\n", "\(same.error)")
        }
    }
}
