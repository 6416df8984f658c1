import CLITestSupport
import DemoServer
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TimelineKit

/// The `timeline` executable, run as a user runs it, against an in-process depot-server.
@Suite(.timeLimit(.minutes(2)))
struct CommandLineTests {
    static func timeline(_ arguments: [String]) async throws -> ChildResult {
        try await Executables.run("timeline", arguments)
    }

    @Test func onceListsTheTimelineWithItsAvatarsThenOfflineShowsTheCache() async throws {
        let folder = try Executables.temporaryFolder("timeline-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let run = try await Self.timeline(["--once", "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(run.status == 0, "\(run.error)")
            let lines = run.output.split(separator: "\n").map(String.init)
            #expect(lines.first?.hasPrefix("link fast · network") == true, "\(run.output)")
            #expect(lines.filter { $0.hasPrefix("■ @") }.count == 30, "every post with its avatar: \(run.output)")
            #expect(lines.contains { $0.hasPrefix("-- last synced just now") && $0.hasSuffix("avatars 30/30") })
        }
        // With no network at all, the same posts, and how old they are.
        let offline = try await Self.timeline(["--once", "--link", "offline", "--cache", cache])
        #expect(offline.status == 0, "\(offline.error)")
        #expect(offline.output.split(separator: "\n").filter { $0.hasPrefix("■ @") }.count == 30)
        #expect(offline.output.contains("-- offline — showing cached data from "), "\(offline.output)")
    }

    /// `--post` quits right after sending: the post finishes within the grace
    /// period and the report says so; `--trace` writes the waterfall.
    @Test func postThenQuitPrintsTheReportAndTheWaterfall() async throws {
        let folder = try Executables.temporaryFolder("timeline-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let svg = folder.appending(path: "session.svg").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let run = try await Self.timeline(["--post", "hello from the CLI", "--link", "3g", "--server", server.baseURL.absoluteString,
                                               "--cache", folder.appending(path: "cache.sqlite").path, "--trace", svg])
            #expect(run.status == 0, "\(run.error)")
            #expect(run.output.contains(#"post "hello from the CLI": sent as #31"#), "\(run.output)")
            #expect(run.output.contains("shutdown: 1 finished"), "\(run.output)")
            #expect(run.output.contains("waterfall written to \(svg)"))
            let (data, _) = try await URLSession.shared.data(from: server.baseURL.appending(path: "timeline"))
            #expect(try JSONDecoder().decode([TimelinePost].self, from: data).first?.text == "hello from the CLI")
            // The link was set on the server through its control route.
            #expect(server.currentConditions(for: "/timeline").bandwidthKbps == 1_000)
        }
        let chart = try String(contentsOfFile: svg, encoding: .utf8)
        #expect(chart.hasPrefix("<svg") || chart.contains("<svg"))
        #expect(chart.contains("CreatePost"))
    }

    @Test func badInputSaysWhatIsAccepted() async throws {
        let run = try await Self.timeline(["--link", "dialup"])
        #expect(run.status != 0)
        #expect(run.error.contains("unknown link \"dialup\": use fast, 3g, edge, offline, or KBPS,RTTMS"))

        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let folder = try Executables.temporaryFolder("timeline-cli")
            defer { try? FileManager.default.removeItem(at: folder) }
            let cache = folder.appending(path: "c.sqlite").path
            let empty = try await Self.timeline(["--post", " ", "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(empty.status == 1)
            #expect(empty.output.contains(#"post " ": not sent — text must be 1 to 280 characters"#), "\(empty.output)")
            // The refused post shows once in the timeline, with the reason, then leaves it.
            let shown = try await Self.timeline(["--once", "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(shown.output.contains("✗ @you"), "\(shown.output)")
            #expect(shown.output.contains("not sent: text must be 1 to 280 characters"), "\(shown.output)")
            let gone = try await Self.timeline(["--once", "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(!gone.output.contains("✗"), "\(gone.output)")
        }
        for (grace, message) in [("-1", "--grace must be between 0 and 3600 seconds"), ("abc", "--grace"), ("nan", "--grace must be between 0 and 3600 seconds")] {
            let run = try await Self.timeline(["--post", "x", "--grace=\(grace)"])
            #expect(run.status != 0)
            #expect(run.error.contains(message), "\(grace): \(run.error)")
        }
    }

    /// A post written with no network is durable at once (exit 0) and says
    /// "queued"; `--once` with no network shows it pending and exits 1 in one
    /// sentence; with the server back, `--once` sends it first, exactly once.
    /// Without `--link`, nothing but the app's own requests reaches the server.
    @Test func aPostWrittenOfflineIsQueuedThenSentByOnce() async throws {
        let folder = try Executables.temporaryFolder("timeline-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        let nowhere = "http://127.0.0.1:9"
        let post = try await Self.timeline(["--post", "written offline", "--server", nowhere, "--cache", cache, "--grace", "0.5"])
        #expect(post.status == 0, "\(post.error)")
        #expect(post.output.contains(#"post "written offline": queued: will be sent when online"#), "\(post.output)")

        let offline = try await Self.timeline(["--once", "--server", nowhere, "--cache", cache])
        #expect(offline.status == 1)
        #expect(offline.output.contains("◌ @you  written offline"), "\(offline.output)")
        #expect(offline.error.hasPrefix("1 post stays queued, to be sent when online ("), "\(offline.error)")
        #expect(offline.error.split(separator: "\n").count == 1, "one sentence: \(offline.error)")

        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let online = try await Self.timeline(["--once", "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(online.status == 0, "\(online.error)")
            #expect(online.output.contains("@you  written offline"), "\(online.output)")
            #expect(!online.output.contains("◌"), "\(online.output)")
            let (data, _) = try await URLSession.shared.data(from: server.baseURL.appending(path: "timeline"))
            #expect(try JSONDecoder().decode([TimelinePost].self, from: data).filter { $0.text == "written offline" }.count == 1)
            let (stats, _) = try await URLSession.shared.data(from: server.baseURL.appending(path: "_stats"))
            #expect(try JSONDecoder().decode(DemoServer.Stats.self, from: stats).requests["POST /_control", default: 0] == 0)
        }
    }

    /// A post holding escapes is printed visibly by `--post` and `--once`.
    @Test func aPostWithEscapesIsPrintedHarmlessly() async throws {
        let folder = try Executables.temporaryFolder("timeline-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let text = "\u{1B}]0;pwned\u{7}\u{1B}[2J hi\u{202E}"
            let post = try await Self.timeline(["--post", text, "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(post.status == 0, "\(post.error)")
            let once = try await Self.timeline(["--once", "--server", server.baseURL.absoluteString, "--cache", cache])
            #expect(once.status == 0, "\(once.error)")
            for output in [post.output, once.output] {
                let controls = output.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) || (0x202A...0x202E).contains($0.value) }
                #expect(controls.isEmpty, "\(output)")
                #expect(output.contains("␛]0;pwned␇␛[2J hi"), "\(output)")
            }
        }
    }

    /// Bad numbers are one clear sentence, exit 64.
    @Test func badNumbersAreRefusedInOneSentence() async throws {
        try await Executables.refuses("timeline", [
            (["--grace", "-1"], "--grace must be between 0 and 3600 seconds"),
            (["--refresh-interval", "-3"], "--refresh-interval must be at least 1 second"),
            (["--avatar-bytes", "5"], "--avatar-bytes must be between 100 and 10000000"),
            (["--server", "nowhere", "--once"], "--server needs an absolute URL"),
        ])
    }

}
