import CLITestSupport
import DemoServer
import Foundation
import GRDB
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The `nerdfeed` executable, run as a user runs it.
@Suite(.timeLimit(.minutes(2)))
struct CommandLineTests {
    /// Runs nerdfeed with `arguments` and waits for it.
    static func nerdfeed(_ arguments: [String]) async throws -> ChildResult {
        try await Executables.run("nerdfeed", arguments)
    }

    /// The item links and the status of a `--json` run.
    static func listing(_ run: ChildResult) throws -> (links: [String], status: String) {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any], "\(run.output) \(run.error)")
        let items = object["items"] as? [[String: Any]] ?? []
        return (items.compactMap { $0["link"] as? String }, object["status"] as? String ?? "")
    }

    /// The issue's end-to-end test: sync from a live server, stop it, then read
    /// the same items offline, with an offline status.
    @Test func syncThenOfflineShowsTheSameItems() async throws {
        let folder = try Executables.temporaryFolder("nerdfeed-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path

        let server = try await DemoServer.start(.init(port: 0, epoch: Date()))
        let feed = server.baseURL.appending(path: "forum/rss").absoluteString
        let online = try await Self.nerdfeed(["--json", "--feed", feed, "--songs", server.baseURL.absoluteString, "--cache", cache])
        await server.stop()
        #expect(online.status == 0, "\(online.error)")
        let synced = try Self.listing(online)
        #expect(synced.links.count > 5)
        #expect(synced.status == "last synced just now")

        // The server is gone: the offline run makes no request and shows the same list.
        let offline = try await Self.nerdfeed(["--json", "--offline", "--feed", feed, "--cache", cache])
        #expect(offline.status == 0, "\(offline.error)")
        let cached = try Self.listing(offline)
        #expect(cached.links == synced.links)
        #expect(cached.status.hasPrefix("offline — showing cached data from"), "\(cached.status)")

        // And as text.
        let text = try await Self.nerdfeed(["--once", "--offline", "--feed", feed, "--cache", cache])
        let lines = text.output.split(separator: "\n")
        #expect(lines.count == synced.links.count + 1, "\(text.output)")
        #expect(lines.last?.hasPrefix("-- offline — showing cached data from") == true, "\(text.output)")

        // Without --offline, a one-shot run against the gone server does not wait
        // for a network: it tries once, then prints the cached list and says
        // why, with exit status 1 (the sync failed).
        let unreachable = try await Self.nerdfeed(["--once", "--feed", feed, "--songs", server.baseURL.absoluteString, "--cache", cache])
        #expect(unreachable.status == 1, "\(unreachable.error)")
        let fallback = unreachable.output.split(separator: "\n")
        #expect(fallback.count == synced.links.count + 1, "\(unreachable.output)")
        #expect(fallback.last?.hasPrefix("-- offline — showing cached data from") == true, "\(unreachable.output)")
    }

    @Test func jsonListsItemsAndStatus() async throws {
        let folder = try Executables.temporaryFolder("nerdfeed-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let run = try await Self.nerdfeed(["--json", "--feed", server.baseURL.appending(path: "forum/atom").absoluteString, "--songs", server.baseURL.absoluteString, "--cache", folder.appending(path: "c.sqlite").path])
            #expect(run.status == 0, "\(run.error)")
            let object = try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any]
            let items = object?["items"] as? [[String: Any]]
            #expect((items?.count ?? 0) > 5)
            #expect(items?.first?["link"] is String)
            #expect((object?["songs"] as? [[String: Any]])?.count == 10)
            #expect((object?["status"] as? String)?.hasPrefix("last synced") == true)
        }
    }

    @Test func aFailingFeedKeepsTheLastGoodList() async throws {
        let folder = try Executables.temporaryFolder("nerdfeed-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let feed = server.baseURL.appending(path: "forum/rss").absoluteString
            let first = try Self.listing(try await Self.nerdfeed(["--json", "--feed", feed, "--cache", cache]))
            #expect(!first.links.isEmpty)

            // The feed now fails every time (500).
            var control = URLRequest(url: server.baseURL.appending(path: "_control"))
            control.httpMethod = "POST"
            control.httpBody = Data(#"{"route": "/forum/rss", "failRate": 1}"#.utf8)
            _ = try await URLSession.shared.data(for: control)

            let second = try Self.listing(try await Self.nerdfeed(["--json", "--feed", feed, "--cache", cache]))
            #expect(second.links == first.links)
            #expect(second.status.hasPrefix("sync failed"), "\(second.status)")
        }
    }

    /// A feed whose titles, authors and summaries hold terminal escapes
    /// (double-encoded, in CDATA, C1, bidi overrides): `--once` prints them
    /// visibly and harmlessly; `--json` keeps the real text, escaped.
    @Test func hostileTextNeverReachesTheTerminalAsControls() async throws {
        let folder = try Executables.temporaryFolder("nerdfeed-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let feed = server.url(for: .hostileText).absoluteString
            let run = try await Self.nerdfeed(["--once", "--feed", feed, "--songs", server.baseURL.absoluteString, "--cache", cache])
            #expect(run.status == 0, "\(run.error)")
            let unsafe = run.output.unicodeScalars.filter { scalar in
                (scalar.value < 0x20 && scalar != "\n") || (0x7F...0x9F).contains(scalar.value)
                    || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
            }
            #expect(unsafe.isEmpty, "\(unsafe.map { String($0.value, radix: 16) })")
            #expect(run.output.contains("Clear ␛[2J the screen"), "\(run.output)")
            #expect(run.output.contains("Retitle ␛]0;pwned␇ the window"), "\(run.output)")
            #expect(run.output.contains("C1 \u{FFFD}31m CSI"), "\(run.output)")
            #expect(run.output.contains("A summary"))
            let json = try await Self.nerdfeed(["--json", "--feed", feed, "--songs", server.baseURL.absoluteString, "--cache", cache])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
            let titles = (object["items"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
            #expect(titles.contains("Clear \u{1B}[2J the screen"), "the cache keeps the real text: \(titles)")
        }
    }

    /// Every numeric argument out of range is one clear sentence, exit 64.
    @Test func badArgumentsAreRefusedInOneSentence() async throws {
        try await Executables.refuses("nerdfeed", [
            (["--limit", "-1"], "--limit cannot be negative"),
            (["--limit=-1", "--once", "--offline"], "--limit cannot be negative"),
            (["--limit", "many"], "The value 'many' is invalid for '--limit <limit>'"),
            (["--port", "70000"], "--port must be between 0 and 65535"),
            (["--port", "-5"], "--port must be between 0 and 65535"),
            (["--refresh-interval", "0"], "--refresh-interval must be between 1 and 86400 seconds"),
            (["--keep", "-1"], "--keep cannot be negative"),
            (["--keep", "lots"], "The value 'lots' is invalid for '--keep <keep>'"),
            (["--feed", "not a url", "--once"], "--feed needs an absolute URL"),
            (["--bogus"], "Unknown option '--bogus'"),
        ])
    }

    /// `--keep N` leaves the newest N items of the feed in the cache when a
    /// one-shot run exits; by default it keeps 1,000 (the whole demo feed).
    @Test func keepLimitsTheCachedItems() async throws {
        let folder = try Executables.temporaryFolder("nerdfeed-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let feed = server.baseURL.appending(path: "forum/rss").absoluteString
            func cachedItems(_ cache: String) async throws -> Int {
                let queue = try DatabaseQueue(path: cache)
                defer { try? queue.close() }
                return try await queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM feedItem") ?? 0 }
            }
            let full = folder.appending(path: "full.sqlite").path
            let all = try await Self.nerdfeed(["--json", "--feed", feed, "--songs", server.baseURL.absoluteString, "--cache", full])
            #expect(all.status == 0, "\(all.error)")
            let synced = try Self.listing(all).links.count
            #expect(synced > 3)
            #expect(try await cachedItems(full) == synced)

            let kept = folder.appending(path: "kept.sqlite").path
            let three = try await Self.nerdfeed(["--json", "--keep", "3", "--feed", feed, "--songs", server.baseURL.absoluteString, "--cache", kept])
            #expect(three.status == 0, "\(three.error)")
            #expect(try await cachedItems(kept) == 3)
        }
    }

    /// A sync that fails still prints the cached list with its error line,
    /// and says so with exit status 1, for scripts.
    @Test func aFailedSyncExitsOneAfterPrintingTheCache() async throws {
        let folder = try Executables.temporaryFolder("nerdfeed-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        for mode in ["--once", "--json"] {
            let run = try await Self.nerdfeed([mode, "--feed", "http://127.0.0.1:9/rss", "--songs", "http://127.0.0.1:9", "--cache", cache])
            #expect(run.status == 1, "\(mode): \(run.status) \(run.error)")
            #expect(run.output.contains("offline — nothing cached yet"), "\(mode): \(run.output)")
        }
    }

}
