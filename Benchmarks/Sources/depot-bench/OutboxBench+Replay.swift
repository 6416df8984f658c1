import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import NIOCore
import Synchronization

/// The second half of `depot-bench outbox`: 1,000 queued mutations replayed
/// over loopback, at 1 and 8 lanes, against a hand-written replay.
extension OutboxBench {
    struct ReplayRun {
        var wall: Double
        var clientCPU: Double
        var serverCPU: Double
        /// Requests the server answered beyond one per key (retries, replays).
        var extraPosts: Int
    }

    struct ReplayRow {
        var name: String
        var runs: [ReplayRun]
    }

    static func replay(folder: URL, count: Int, rounds: Int) async throws -> [ReplayRow] {
        let server = try ServerProcess.start()
        defer { server.stop() }
        let base = URL(string: "http://127.0.0.1:\(server.port)")!
        print("\n2. replay: \(count) mutations queued offline, then a new store, controller (AsyncHTTPClientTransport) and outbox on the file; start() until waitUntilIdle()")
        print("   server: depot-bench serve, pid \(server.pid) on \(base); server CPU from /proc/\(server.pid)/task/*/schedstat")
        let scenarios: [(String, (Int, Int) async throws -> ReplayRun)] = [
            ("Depot outbox, 1 lane", { round, n in try await depotReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 1, policy: .fixed(8)) }),
            ("Depot outbox, 8 lanes", { round, n in try await depotReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 8, policy: .fixed(8)) }),
            ("Depot outbox, 8 lanes, default concurrency policy", { round, n in try await depotReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 8, policy: .default) }),
            ("raw replay: GRDB + AsyncHTTPClient, 1 lane", { round, n in try await rawReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 1) }),
            ("raw replay: GRDB + AsyncHTTPClient, 8 lanes", { round, n in try await rawReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 8) }),
            ("diagnostic: raw replay + 2 Outbox.snapshot() per mutation, 1 lane", { round, n in try await rawReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 1, snapshots: true) }),
            ("diagnostic: raw replay + 2 Outbox.snapshot() per mutation, 8 lanes", { round, n in try await rawReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 8, snapshots: true) }),
            ("diagnostic: raw replay, each entry claimed in a write transaction, 1 lane", { round, n in try await rawReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 1, claims: true) }),
            ("diagnostic: raw replay, each entry claimed in a write transaction, 8 lanes", { round, n in try await rawReplay(folder: folder, base: base, server: server, round: round, count: n, lanes: 8, claims: true) }),
            ("raw AsyncHTTPClient POSTs, 1 at a time (no store)", { round, n in try await rawPosts(base: base, server: server, round: round, count: n, concurrency: 1) }),
            ("raw AsyncHTTPClient POSTs, 8 at a time (no store)", { round, n in try await rawPosts(base: base, server: server, round: round, count: n, concurrency: 8) }),
        ]
        for (_, body) in scenarios { _ = try await body(-1, min(count, 200)) }  // warm up
        var runs: [String: [ReplayRun]] = [:]
        for round in 0..<rounds {
            for offset in 0..<scenarios.count {
                let (name, body) = scenarios[(round + offset) % scenarios.count]
                let run = try await body(round, count)
                runs[name, default: []].append(run)
                print(String(format: "  round %d  %@ %7.0f mutations/s  client %6.1f µs CPU  server %6.1f µs CPU per mutation%@",
                    round + 1, name.padding(toLength: 68, withPad: " ", startingAt: 0) as NSString, Double(count) / run.wall, run.clientCPU / Double(count) * 1e6, run.serverCPU / Double(count) * 1e6,
                    (run.extraPosts > 0 ? "  (\(run.extraPosts) extra posts)" : "") as NSString))
            }
        }
        return scenarios.map { ReplayRow(name: $0.0, runs: runs[$0.0] ?? []) }
    }

    /// Queues `count` mutations offline and closes the store, as a run that
    /// ended without network would; then measures a relaunch that delivers them.
    static func queueOffline(folder: URL, round: Int, count: Int, lanes: Int) async throws -> String {
        let path = folder.appending(path: "replay-\(UUID().uuidString).sqlite").path
        let store = try Store(path: path, migrator: migrator)
        let controller = offlineController(store: store, notifications: false)
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        for index in 0..<count { try await outbox.send(makeMutation(index, round: round, lanes: lanes)) }
        _ = await controller.shutdown(grace: .zero)
        await outbox.waitUntilIdle()
        try await store.close()
        return path
    }

    static func depotReplay(folder: URL, base: URL, server: ServerProcess, round: Int, count: Int, lanes: Int, policy: ConcurrencyPolicy) async throws -> ReplayRun {
        let path = try await queueOffline(folder: folder, round: round, count: count, lanes: lanes)
        let store = try Store(path: path, migrator: migrator)
        var configuration = NetworkController.Configuration(baseURL: base, transport: AsyncHTTPClientTransport(), limits: .init(concurrency: policy))
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        try await check(store, pending: count)
        let before = try await serverStats(base)

        let clientCPU = TransportBench.cpuSeconds(children: false)
        let serverCPU = threadCPUSeconds(pid: server.pid)
        let start = ContinuousClock.now
        try await outbox.start()
        await outbox.waitUntilIdle()
        let wall = (ContinuousClock.now - start).seconds
        let run = ReplayRun(
            wall: wall,
            clientCPU: TransportBench.cpuSeconds(children: false) - clientCPU,
            serverCPU: threadCPUSeconds(pid: server.pid) - serverCPU,
            extraPosts: 0)

        let snapshot = try await outbox.snapshot()
        let committed = try await store.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM post WHERE NOT isPending AND serverID IS NOT NULL") ?? 0
        }
        precondition(snapshot.pendingCount == 0 && snapshot.failed.isEmpty && committed == count, "replay left \(snapshot.pendingCount) pending, \(snapshot.failed.count) failed, \(committed) of \(count) committed")
        let after = try await serverStats(base)
        precondition(after.keys - before.keys == count, "the server saw \(after.keys - before.keys) keys for \(count) mutations")
        _ = await controller.shutdown(grace: .zero)
        await outbox.waitUntilIdle()
        try await store.close()
        try? FileManager.default.removeItem(atPath: path)
        return ReplayRun(wall: run.wall, clientCPU: run.clientCPU, serverCPU: run.serverCPU, extraPosts: (after.posts - before.posts) - count)
    }

    /// A hand-written replay of the same queue: per lane, one after another,
    /// read the lane's oldest row, POST it with its key (AsyncHTTPClient),
    /// and commit the answer (the post row's update and the outbox row's
    /// delete) in one transaction. The outbox's own reads and writes per
    /// mutation, without its snapshots, events and controller.
    ///
    /// `snapshots` adds the outbox's two `Outbox.snapshot()` reads per
    /// mutation (before the POST and after the commit): a diagnostic.
    /// - Parameter claims: Pick each entry as the outbox does, in a write
    ///   transaction that claims it (the cost of one sender per entry),
    ///   instead of a read.
    static func rawReplay(folder: URL, base: URL, server: ServerProcess, round: Int, count: Int, lanes: Int, snapshots: Bool = false, claims: Bool = false) async throws -> ReplayRun {
        let path = try await queueOffline(folder: folder, round: round, count: count, lanes: lanes)
        let store = try Store(path: path, migrator: migrator)
        try await check(store, pending: count)
        let idle = snapshots ? offlineController(store: store, notifications: false) : nil
        let outbox = idle.map { Outbox(store: store, controller: $0, types: [SendPost.self]) }
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let url = base.absoluteString + "/m"
        let before = try await serverStats(base)
        let clientCPU = TransportBench.cpuSeconds(children: false)
        let serverCPU = threadCPUSeconds(pid: server.pid)
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<lanes {
                group.addTask {
                    let laneName = "posts-\(lane)"
                    while true {
                        let pick = { @Sendable (db: Database) throws -> (id: Int64, payload: Data, key: String)? in
                            try Row.fetchOne(db, sql: "SELECT id, payload, idempotencyKey FROM depotOutbox WHERE lane = ? AND state = 'pending' ORDER BY id LIMIT 1", arguments: [laneName])
                                .map { ($0["id"], $0["payload"], $0["idempotencyKey"]) }
                        }
                        let next = claims
                            ? try await store.writer.write { db in
                                let next = try pick(db)
                                if let next {
                                    try db.execute(
                                        sql: "UPDATE depotOutbox SET claimedBy = ?, claimPID = ?, claimExpires = ? WHERE id = ?",
                                        arguments: ["bench", 1, Date().timeIntervalSince1970 + 60, next.id])
                                }
                                return next
                            }
                            : try await store.read(pick)
                        guard let next else { return }
                        let payload = try JSONDecoder().decode(SendPost.Payload.self, from: next.payload)
                        if let outbox { _ = try await outbox.snapshot() }
                        var request = HTTPClientRequest(url: url)
                        request.method = .POST
                        request.headers.add(name: "Content-Type", value: "application/json")
                        request.headers.add(name: "Idempotency-Key", value: next.key)
                        request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(["text": payload.text])))
                        let response = try await client.execute(request, timeout: .seconds(30))
                        let answer = try await response.body.collect(upTo: 1 << 20)
                        precondition(response.status.code == 201)
                        struct Sent: Decodable { var id: Int }
                        let sent = try JSONDecoder().decode(Sent.self, from: Data(answer.readableBytesView))
                        try await store.writer.write { db in
                            try PostRow(localID: payload.localID, serverID: sent.id, text: payload.text, isPending: false).update(db)
                            try db.execute(sql: "DELETE FROM depotOutbox WHERE id = ?", arguments: [next.id])
                        }
                        if let outbox { _ = try await outbox.snapshot() }
                    }
                }
            }
            try await group.waitForAll()
        }
        let run = ReplayRun(
            wall: (ContinuousClock.now - start).seconds,
            clientCPU: TransportBench.cpuSeconds(children: false) - clientCPU,
            serverCPU: threadCPUSeconds(pid: server.pid) - serverCPU,
            extraPosts: 0)
        try await client.shutdown()
        let committed = try await store.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM post WHERE NOT isPending AND serverID IS NOT NULL") ?? 0
        }
        precondition(committed == count, "raw replay committed \(committed) of \(count)")
        let after = try await serverStats(base)
        if let idle {
            _ = await idle.shutdown(grace: .zero)
            await outbox?.waitUntilIdle()
        }
        try await store.close()
        try? FileManager.default.removeItem(atPath: path)
        return ReplayRun(wall: run.wall, clientCPU: run.clientCPU, serverCPU: run.serverCPU, extraPosts: (after.posts - before.posts) - count)
    }

    /// The same POSTs (same body, a key each) with AsyncHTTPClient alone, no
    /// store: what the network part costs this client and the server.
    static func rawPosts(base: URL, server: ServerProcess, round: Int, count: Int, concurrency: Int) async throws -> ReplayRun {
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let url = base.absoluteString + "/m"
        let before = try await serverStats(base)
        let clientCPU = TransportBench.cpuSeconds(children: false)
        let serverCPU = threadCPUSeconds(pid: server.pid)
        let start = ContinuousClock.now
        try await TransportBench.fanOut(count, concurrency) { index in
            let body = try JSONEncoder().encode(["text": makeMutation(index, round: round).payload.text])
            var request = HTTPClientRequest(url: url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "Idempotency-Key", value: UUID().uuidString)
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await client.execute(request, timeout: .seconds(30))
            let answer = try await response.body.collect(upTo: 1 << 20)
            precondition(response.status.code == 201 && answer.readableBytes > 0)
        }
        let run = ReplayRun(
            wall: (ContinuousClock.now - start).seconds,
            clientCPU: TransportBench.cpuSeconds(children: false) - clientCPU,
            serverCPU: threadCPUSeconds(pid: server.pid) - serverCPU,
            extraPosts: 0)
        try await client.shutdown()
        let after = try await serverStats(base)
        return ReplayRun(wall: run.wall, clientCPU: run.clientCPU, serverCPU: run.serverCPU, extraPosts: (after.posts - before.posts) - count)
    }

    struct ServerStats: Decodable { var posts: Int; var keys: Int }

    static func serverStats(_ base: URL) async throws -> ServerStats {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: base.absoluteString + "/m/stats"), timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 16)
        return try JSONDecoder().decode(ServerStats.self, from: Data(body.readableBytesView))
    }

    /// CPU time of every live thread of `pid` in seconds (Linux: the first
    /// field of /proc/PID/task/TID/schedstat, nanoseconds on the CPU), finer
    /// than /proc/PID/stat's clock ticks. The server's threads live as long as it.
    static func threadCPUSeconds(pid: Int32) -> Double {
        let folder = "/proc/\(pid)/task"
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return .nan }
        var nanoseconds = 0
        for thread in threads {
            guard let text = try? String(contentsOfFile: "\(folder)/\(thread)/schedstat", encoding: .utf8),
                  let first = text.split(separator: " ").first, let value = Int(first) else { continue }
            nanoseconds += value
        }
        return Double(nanoseconds) / 1e9
    }

    static func replayTable(_ rows: [ReplayRow], count: Int) -> String {
        var lines = [
            "Replay of \(count) queued mutations over loopback, \(rows.first?.runs.count ?? 0) rounds: medians over rounds [min to max]",
            "",
            "| path | mutations/s | client CPU per mutation | server CPU per mutation | client + server | extra posts |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in rows {
            let rates = row.runs.map { Double(count) / $0.wall }
            let client = row.runs.map { $0.clientCPU / Double(count) * 1e6 }
            let server = row.runs.map { $0.serverCPU / Double(count) * 1e6 }
            let total = row.runs.map { ($0.clientCPU + $0.serverCPU) / Double(count) * 1e6 }
            lines.append(String(format: "| %@ | %.0f [%.0f to %.0f] | %.1f µs [%.1f to %.1f] | %.1f µs | %.1f µs | %d |",
                row.name as NSString, median(rates), rates.min() ?? .nan, rates.max() ?? .nan,
                median(client), client.min() ?? .nan, client.max() ?? .nan, median(server), median(total),
                row.runs.map(\.extraPosts).reduce(0, +)))
        }
        lines.append("")
        lines.append("Client CPU is this process (getrusage, user + system): the outbox, the controller, AsyncHTTPClient and SQLite;")
        lines.append("the server is its own process, so none of its CPU is in the client's figure.")
        return lines.joined(separator: "\n")
    }
}
