import CLITestSupport
import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing
import TimelineKit

/// `timeline --follow` against a real depot-server, with the follower in a
/// process of its own and the test as the other client that writes.
@Suite(.timeLimit(.minutes(10)))
struct FollowTests {
    /// How many follower runs are killed: `DEPOT_FOLLOW_KILL_TRIALS`, 20 by default (CI).
    static let trials = ProcessInfo.processInfo.environment["DEPOT_FOLLOW_KILL_TRIALS"].flatMap(Int.init) ?? 20

    /// A client of the server other than the follower: it posts and deletes.
    final class Writer: Sendable {
        let base: URL
        let transport = AsyncHTTPClientTransport()

        init(_ server: DemoServer) {
            base = server.baseURL
        }

        func send(_ method: NetworkRequest.Method, _ path: String, json: String? = nil) async throws -> NetworkResponse {
            let url = URL(string: base.absoluteString + "/" + path)!
            let response = try await transport.send(TransportRequest(url: url, method: method, headers: json == nil ? [:] : ["Content-Type": "application/json"], body: json.map { Data($0.utf8) }, timeout: .seconds(10)))
            var body = Data()
            for try await chunk in response.body { body.append(chunk) }
            return NetworkResponse(status: response.status, headers: response.headers, body: body, url: url)
        }

        /// Posts `text`; returns the new post's id.
        func post(_ text: String) async throws -> Int {
            let body = String(decoding: try JSONEncoder().encode(["text": text, "author": "writer"]), as: UTF8.self)
            let response = try await send(.post, "posts", json: body)
            return try response.decode(TimelinePost.self).id
        }

        func delete(_ id: Int) async throws {
            #expect(try await send(.delete, "posts/\(id)").status == 204)
        }

        func control(_ json: String) async throws {
            #expect(try await send(.post, "_control", json: json).status == 200)
        }

        /// The server's posts, newest first, and the sequence they are current as of.
        func timeline() async throws -> (posts: [TimelinePost], cursor: String) {
            let response = try await send(.get, "timeline?limit=100000")
            return (try response.decode([TimelinePost].self), response.headers["Change-Cursor"] ?? "")
        }
    }

    /// A `timeline --follow --json` process, its output and its states recorded.
    struct Follower {
        let child: LiveChild
        let output: Recorder<String>
        let states: Recorder<String>

        init(_ server: DemoServer, cache: String) throws {
            guard let path = Executables.url("timeline")?.path else { throw SpawnError(description: "timeline is not built") }
            child = try LiveChild.start(path, ["--follow", "--json", "--server", server.baseURL.absoluteString, "--cache", cache])
            output = Recorder(child.output, timeout: .seconds(60))
            states = Recorder(child.errors, timeout: .seconds(60))
        }

        /// Waits until the stream is open: what changes from now on is news.
        func live() async throws {
            _ = try await states.next { $0 == "timeline: live" }
        }

        /// Waits for the next `count` lines, and returns them.
        func lines(_ count: Int) async throws -> [String] {
            var lines: [String] = []
            for _ in 0..<count { lines.append(try await output.next()) }
            return lines
        }

        /// SIGKILL, and its status once it ended.
        func kill() async -> Int32 {
            child.send(SIGKILL)
            return await child.exitStatus()
        }
    }

    /// The full sync a first run makes, done here before any change, so that
    /// the cursor starts at 0.
    @MainActor
    static func syncInFull(_ server: DemoServer, cache: String) async throws {
        let store = try Store(path: cache, migrator: TimelineSchema.migrator)
        var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let report = try await LiveFeed(TimelineFeed(), controller: controller).catchUp()
        #expect(report.fullSync && report.cursor == "0")
        _ = await controller.shutdown(grace: .zero)
        try await store.close()
    }

    @Test func aRestartedFollowerPrintsWhatChangedInBetweenOnce() async throws {
        let folder = try Executables.temporaryFolder("timeline-follow")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        try await DemoServer.withRunning(.init(port: 0, epoch: Date())) { server in
            let writer = Writer(server)
            defer { Task { await writer.transport.shutdown() } }
            // A first run starts after the current timeline: the 30 posts are not news.
            let first = try Follower(server, cache: cache)
            try await first.live()
            let marker = try await writer.post("first")
            try await writer.delete(3)
            #expect(try await first.lines(2) == [
                #"{"change":"post","id":\#(marker),"author":"writer","text":"first"}"#,
                #"{"change":"delete","id":3}"#,
            ])
            #expect(await first.kill() == 137)

            // Changes while nobody follows…
            let away = try await writer.post("while away \u{1B}[2J")
            try await writer.delete(marker)
            // …are printed by the next run, once, then what comes live.
            let second = try Follower(server, cache: cache)
            #expect(try await second.lines(2) == [
                #"{"change":"post","id":\#(away),"author":"writer","text":"while away \u001b[2J"}"#,
                #"{"change":"delete","id":\#(marker)}"#,
            ])
            try await second.live()
            let live = try await writer.post("live")
            // The next line is the live change: nothing from before came again.
            #expect(try await second.lines(1) == [#"{"change":"post","id":\#(live),"author":"writer","text":"live"}"#])
            _ = await second.kill()
        }
    }

    @Test func aFollowerKilledAtRandomMomentsAppliesEveryChangeExactlyOnce() async throws {
        let folder = try Executables.temporaryFolder("timeline-follow-kill")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        let seed = UInt64(ProcessInfo.processInfo.environment["DEPOT_KILL_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...1_000_000))
        var random = SeededGenerator(seed: seed)
        var configuration = DemoServer.Configuration(port: 0, epoch: Date())
        configuration.changeHistory = 1_000_000
        try await DemoServer.withRunning(configuration) { server in
            let writer = Writer(server)
            defer { Task { await writer.transport.shutdown() } }
            try await Self.syncInFull(server, cache: cache)
            // Changes flow the whole time: posts, and every third one deletes an earlier post.
            let flowing = Task {
                var written: [Int] = []
                var count = 0
                while !Task.isCancelled {
                    count += 1
                    guard let id = try? await writer.post("change \(count)") else { continue }
                    written.append(id)
                    if count % 3 == 0, written.count > 2 { try? await writer.delete(written.removeFirst()) }
                }
            }
            var printed: [String] = []
            for trial in 0..<Self.trials {
                let follower = try Follower(server, cache: cache)
                // Killed after it printed 1 to 15 changes: while it catches up, applies, prints.
                let count = Int.random(in: 1...15, using: &random)
                _ = try await follower.lines(count)
                let status = await follower.kill()
                #expect(status == 137, "trial \(trial) (seed \(seed)): \(status) \(follower.states.values)")
                printed += follower.output.values
            }
            flowing.cancel()
            _ = await flowing.value
            // One last run, until a last change shows it has applied everything before it.
            let last = try Follower(server, cache: cache)
            let end = try await writer.post("end")
            let endLine = #"{"change":"post","id":\#(end),"author":"writer","text":"end"}"#
            _ = try await last.output.next { $0 == endLine }
            _ = await last.kill()
            printed += last.output.values

            // Nothing was printed twice: no change reached the cache twice.
            #expect(Set(printed).count == printed.count, "seed \(seed): a change was printed twice")
            // And the cache is the server's, with every change applied exactly once.
            let (posts, cursor) = try await writer.timeline()
            let store = try Store(path: cache, migrator: TimelineSchema.migrator)
            let (cached, integrity) = try await store.read { db in
                (try TimelinePost.order(Column("id").desc).fetchAll(db), try String.fetchAll(db, sql: "PRAGMA integrity_check"))
            }
            #expect(integrity == ["ok"])
            #expect(cached == posts, "seed \(seed)")
            #expect(try await store.ledger.cursor(for: TimelineFeed.syncKey) == cursor)
            // The first run's full sync was at sequence 0: every change since, once.
            #expect(try await store.ledger.appliedChanges(for: TimelineFeed.syncKey) == Int(cursor), "seed \(seed)")
            try await store.close()
        }
    }
}
