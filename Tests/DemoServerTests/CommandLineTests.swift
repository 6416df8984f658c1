import CLITestSupport
import DemoServer
import Foundation
import Testing

/// The `depot-server` executable's arguments, run as a user runs it.
@Suite(.timeLimit(.minutes(2)))
struct CommandLineTests {
    /// Bad numbers are one clear sentence, exit 64, before anything binds.
    @Test func badArgumentsAreRefusedInOneSentence() async throws {
        try await Executables.refuses("depot-server", [
            (["--port", "99999"], "--port must be between 0 and 65535"),
            (["--port", "-1"], "--port must be between 0 and 65535"),
            (["--latency", "-1"], "--latency must be between 0 and 600000 milliseconds"),
            (["--bandwidth", "0"], "--bandwidth must be between 1 and 10000000 kbit/s"),
            (["--initial-posts", "999999"], "--initial-posts must be between 0 and 20000"),
            (["--post-interval", "0"], "--post-interval must be between 1 and 86400 seconds"),
            (["--timeline-posts", "-1"], "--timeline-posts must be between 0 and 1000000"),
            (["--change-history", "2000000"], "--change-history must be between 0 and 1000000"),
            (["--fail-rate", "2"], "--fail-rate must be between 0 and 1"),
            (["--token-lifetime", "0"], "--token-lifetime must be between 0.1 and 31536000 seconds"),
            (["--token-lifetime", "nan"], "--token-lifetime must be between 0.1 and 31536000 seconds"),
            (["--seed", "-1"], "The value '-1' is invalid for '--seed <seed>'"),
        ])
    }

    /// `--help` lists every route group, each with what it needs to answer,
    /// and the banner a started server prints says the same.
    @Test func helpListsEveryRouteGroupAndItsAuthentication() async throws {
        let help = try await Executables.run("depot-server", ["--help"])
        #expect(help.status == 0)
        let banner = DemoServer.banner(listeningOn: URL(string: "http://127.0.0.1:8080")!)
        for text in [help.output, banner] {
            for group in DemoServer.routeGroups {
                let authentication = group.authentication.map { "needs authentication:\n    \($0)" } ?? "no authentication"
                #expect(text.contains("  \(group.name): \(group.purpose); \(authentication)"), "\(group.name) is missing")
                for route in group.routes { #expect(text.contains("    \(route)\n"), "\(route) is missing") }
            }
            #expect(text.contains("crm: Senbei's CRM; needs authentication:\n    Bearer token"))
            for path in ["/forum/rss", "/topsongs/", "/oauth/token", "/contacts", "/contacts/:id", "/tasks", "/timeline", "/timeline/events", "/timeline/changes", "/crm/events", "/crm/changes", "/avatars/", "/paging/items", "/faults/status/", "/faults/bytes/", "/_control", "/_stats"] {
                #expect(text.contains(path), "\(path) is not listed")
            }
        }
    }

    /// Help text wraps lines of 80 columns or more: the route list stays below, so it reads as written.
    @Test func theRouteListFitsIn80Columns() {
        for line in DemoServer.routeSummary.split(separator: "\n") {
            #expect(line.count < 80, "\(line)")
        }
    }

    /// The list is the router's: each group's sample answers 2xx, with the
    /// group's authentication, and without it a group that needs it answers 401.
    @Test func everyListedGroupIsServed() async throws {
        try await DemoServer.withRunning { server in
            for group in DemoServer.routeGroups {
                guard let sample = group.sample else { continue }
                let headers = group.authentication == nil ? [:] : ["Authorization": AppRoutesTests.auth]
                let answer = try await AppRoutesTests().send(server, .GET, sample, headers: headers)
                #expect((200..<300).contains(answer.status), "\(group.name): GET \(sample) answered \(answer.status)")
                if group.authentication != nil {
                    #expect(try await AppRoutesTests().send(server, .GET, sample, headers: [:]).status == 401)
                }
            }
        }
    }
}
