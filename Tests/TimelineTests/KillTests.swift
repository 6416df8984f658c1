import CLITestSupport
import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GRDB
import Testing
import TimelineKit

/// The outbox's promise at process level: posts queued while offline go out
/// exactly once however often `timeline --once` is killed with SIGKILL
/// while it sends them.
@Suite(.timeLimit(.minutes(10)))
struct KillTests {
    /// How many runs are killed: `DEPOT_KILL_TRIALS`, 12 by default (CI).
    static let trials = ProcessInfo.processInfo.environment["DEPOT_KILL_TRIALS"].flatMap(Int.init) ?? 12

    /// Queues `texts` in the cache file as a run with no network would, and
    /// checks that the file is sound.
    static func queue(_ texts: [String], in path: String) async throws {
        let store = try Store(path: path, migrator: TimelineSchema.migrator)
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://127.0.0.1:9")!, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        _ = await controller.shutdown(grace: .zero)  // nothing goes out from here
        let outbox = Outbox(store: store, controller: controller, types: [CreatePost.self])
        for text in texts { try await outbox.send(CreatePost(text: text, author: "killtest")) }
        await outbox.waitUntilIdle()
        let integrity = try await store.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
        #expect(integrity == ["ok"])
        try await store.close()
    }

    /// The server's posts by `killtest`, oldest first.
    static func serverTexts(_ server: DemoServer) async throws -> [String] {
        let url = server.baseURL.appending(path: "timeline").appending(queryItems: [URLQueryItem(name: "limit", value: "200")])
        let (data, _) = try await URLSession.shared.data(from: url)
        return try JSONDecoder().decode([TimelinePost].self, from: data).filter { $0.author == "killtest" }.reversed().map(\.text)
    }

    @Test func postsGoOutExactlyOnceHoweverOftenTheSenderIsKilled() async throws {
        let folder = try Executables.temporaryFolder("timeline-kill")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = folder.appending(path: "cache.sqlite").path
        let seed = UInt64(ProcessInfo.processInfo.environment["DEPOT_KILL_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...1_000_000))
        var random = SeededGenerator(seed: seed)
        // Each answer to a post takes 40 ms: kills land before, during and after requests.
        var configuration = DemoServer.Configuration(port: 0, epoch: Date())
        configuration.conditions = NetworkConditions(latencyMs: 40)
        try await DemoServer.withRunning(configuration) { server in
            let arguments = ["--once", "--server", server.baseURL.absoluteString, "--cache", cache, "--grace", "0"]
            var queued: [String] = []
            var killed = 0
            var ranToTheEnd = 0
            for trial in 0..<Self.trials {
                // Two more posts each time, so that every run has some to send.
                let texts = (0..<2).map { "post \(trial)-\($0)" }
                try await Self.queue(texts, in: cache)
                queued += texts
                // Anywhere from the process's start to about its usual end (~0.3 s).
                let delay = Duration.milliseconds(Int.random(in: 0...300, using: &random))
                let run = try await Executables.run("timeline", arguments, killAfter: delay)
                if run.status == 137 { killed += 1 } else { ranToTheEnd += 1 }
                #expect(run.status == 137 || run.status == 0, "trial \(trial) (seed \(seed)): \(run.status) \(run.error)")
                // Never twice, whatever the moment of the kill.
                let sent = try await Self.serverTexts(server)
                #expect(Set(sent).count == sent.count, "trial \(trial) (seed \(seed)): a post went out twice: \(sent)")
            }
            let last = try await Executables.run("timeline", arguments)
            #expect(last.status == 0, "\(last.error)")
            // Every post exactly once, in the order written.
            #expect(try await Self.serverTexts(server) == queued, "seed \(seed)")
            let store = try Store(path: cache, migrator: TimelineSchema.migrator)
            let (pending, outbox, integrity) = try await store.read { db in
                (try PendingPost.fetchCount(db), try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM depotOutbox") ?? -1, try String.fetchAll(db, sql: "PRAGMA integrity_check"))
            }
            #expect(pending == 0 && outbox == 0 && integrity == ["ok"])
            try await store.close()
            #expect(killed > 0, "no run was killed (seed \(seed)): the delays are too long for this machine")
            print("kill test: \(killed) runs killed, \(ranToTheEnd) ran to the end, \(queued.count) posts, seed \(seed)")
        }
    }
}
