import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import NIOCore
import Synchronization

/// The durable outbox: how long `Outbox.send` takes to make a mutation durable
/// (offline, so no network work interferes) against raw GRDB writing the same
/// rows into the same kind of store, and how fast 1,000 queued mutations are
/// replayed over loopback to `depot-bench serve` (`POST /m`, which honours
/// Idempotency-Key) with AsyncHTTPClientTransport, at 1 and 8 lanes, against
/// a hand-written replay (GRDB + AsyncHTTPClient). Diagnostic rows add the
/// outbox's snapshot read to the raw paths, and a GRDB statement trace counts
/// the transactions per send and per delivery (Benchmarks/NOTES.md, "Outbox").
enum OutboxBench {
    /// A post as an app shows it: pending until the server gave it an id.
    struct PostRow: Codable, FetchableRecord, PersistableRecord, Sendable {
        static let databaseTableName = "post"
        var localID: String
        var serverID: Int?
        var text: String
        var isPending: Bool
    }

    /// The tests' `SendPost`, with a lane number in its payload.
    struct SendPost: Mutation {
        struct Payload: Codable, Sendable {
            var localID: String
            var text: String
            var lane: Int
        }

        static let typeName = "SendPost.v1"
        var payload: Payload
        init(payload: Payload) { self.payload = payload }

        var lane: String { "posts-\(payload.lane)" }
        var request: NetworkRequest { .post("m", json: ["text": payload.text]) }

        func applyOptimistically(_ db: Database) throws {
            try PostRow(localID: payload.localID, serverID: nil, text: payload.text, isPending: true).upsert(db)
        }

        func commit(_ response: NetworkResponse, _ db: Database) throws {
            struct Sent: Decodable { var id: Int }
            let sent = try response.decode(Sent.self)
            try PostRow(localID: payload.localID, serverID: sent.id, text: payload.text, isPending: false).update(db)
        }

        func rollback(_ error: DepotError, _ db: Database) throws {
            _ = try PostRow.deleteOne(db, key: payload.localID)
        }
    }

    static func makeMutation(_ index: Int, round: Int, lanes: Int = 1) -> SendPost {
        SendPost(payload: .init(localID: "local-\(round)-\(index)", text: "Post \(index) of round \(round), written while offline", lane: index % lanes))
    }

    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("posts") { db in
            try db.create(table: "post") { table in
                table.primaryKey("localID", .text)
                table.column("serverID", .integer)
                table.column("text", .text).notNull()
                table.column("isPending", .boolean).notNull()
            }
        }
        return migrator
    }()

    /// The statement `Outbox.send` runs, on the store's own outbox table.
    static let insertOutboxSQL = "INSERT INTO depotOutbox (typeName, lane, payload, idempotencyKey, createdAt) VALUES (?, ?, ?, ?, ?)"

    /// The outbox's payload encoder (sorted keys).
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    static let offlineURL = URL(string: "http://offline.test")!

    /// A controller whose every request finds no network (the tests' offline
    /// controller): the lane's first send waits in its queue, the rest stay in
    /// the store.
    static func offlineController(store: Store, notifications: Bool = true, transport: FixtureTransport = FixtureTransport()) -> NetworkController {
        transport.isOffline = true
        var configuration = NetworkController.Configuration(baseURL: offlineURL, transport: transport)
        if !notifications { configuration.observability.notificationCenter = nil }
        configuration.store = store
        return NetworkController(configuration: configuration)
    }

    // MARK: - Running

    static func run(count: Int, rounds: Int) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-outbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let stealBefore = HostCPU.read()
        let settings = try Store(path: folder.appending(path: "settings.sqlite").path, migrator: migrator)
        let (journal, synchronous, version) = try await settings.read { db in
            (try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?", try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1, try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "?")
        }
        try await settings.close()
        print("outbox: \(count) mutations per run, median of \(rounds) rounds, release build")
        print("store: file in \(folder.path), journal_mode=\(journal), synchronous=\(synchronous) (2 = FULL), SQLite \(version), GRDB.Configuration() as Store uses it\n")

        let enqueueRows = try await enqueue(folder: folder, count: count, rounds: rounds)
        let replayRows = try await replay(folder: folder, count: count, rounds: rounds)
        try await profile(folder: folder, count: count)

        print("\n" + enqueueTable(enqueueRows, count: count))
        print("\n" + replayTable(replayRows, count: count))
        if let before = stealBefore, let after = HostCPU.read(), after.total > before.total {
            let share = Double(after.steal - before.steal) / Double(after.total - before.total) * 100
            print(String(format: "\nsteal during the run: %.0f%% of this VM's CPU time (/proc/stat)", share))
        }
        SummaryRow.print(summary(enqueueRows, replayRows, count: count))
    }

    /// BENCHMARKS.md's outbox rows: medians over rounds; "vs raw" is the
    /// median of per-round ratios, as in the enqueue table.
    static func summary(_ enqueueRows: [EnqueueRow], _ replayRows: [ReplayRow], count: Int) -> [SummaryRow] {
        func enqueue(_ name: String) -> EnqueueRow { enqueueRows.first { $0.name == name }! }
        let send = enqueue("Depot Outbox.send, offline controller")
        func versus(_ raw: EnqueueRow, unit: String) -> (ratio: Double, text: String) {
            let ratio = median(zip(send.perSend, raw.perSend).map { $0 / $1 })
            return (ratio, String(format: "%@ (%.1f vs %.1f µs/%@)", SummaryRow.times(ratio), median(send.perSend) * 1e6, median(raw.perSend) * 1e6, unit))
        }
        let perTransaction = versus(enqueue("raw GRDB, one transaction per mutation"), unit: "send")
        let oneTransaction = versus(enqueue("raw GRDB, all in one transaction"), unit: "mutation")

        /// "a / b mutations/s; c / d µs client CPU each" for 1 and 8 lanes.
        func replay(_ prefix: String) -> (text: String, server: [Double]) {
            let lanes = [1, 8].map { lanes in replayRows.first { $0.name == "\(prefix), \(lanes) lane\(lanes == 1 ? "" : "s")" }!.runs }
            func each(_ value: (ReplayRun) -> Double) -> String { lanes.map { SummaryRow.grouped(median($0.map(value))) }.joined(separator: " / ") }
            return ("\(each { Double(count) / $0.wall }) mutations/s; \(each { $0.clientCPU / Double(count) * 1e6 }) µs client CPU each",
                    lanes.map { runs in median(runs.map { $0.serverCPU / Double(count) * 1e6 }) })
        }
        let depot = replay("Depot outbox")
        return [
            SummaryRow("outbox: `Outbox.send` offline vs raw GRDB, a transaction per mutation", target: "≤ 1.5× raw", perTransaction.text, met: perTransaction.ratio <= 1.5),
            SummaryRow("outbox: `Outbox.send` vs raw GRDB, all in one transaction", oneTransaction.text),
            SummaryRow("outbox: replay of \(SummaryRow.grouped(Double(count))) mutations over loopback, 1 / 8 lanes",
                       "\(depot.text) (server \(depot.server.map { "+" + SummaryRow.grouped($0) }.joined(separator: " / ")) µs)"),
            SummaryRow("outbox: hand-written replay (GRDB + AsyncHTTPClient), 1 / 8 lanes", replay("raw replay: GRDB + AsyncHTTPClient").text),
        ]
    }

    // MARK: - 1. Durable enqueue

    struct EnqueueRun {
        var wall: Double
        var cpu: Double
        /// Each call's wall time, in seconds (empty for one transaction).
        var latencies: [Double]
    }

    struct EnqueueRow {
        var name: String
        var runs: [EnqueueRun]
        var perSend: [Double] { runs.map { $0.wall / Double($0.latencies.isEmpty ? 1 : $0.latencies.count) } }
    }

    static func enqueue(folder: URL, count: Int, rounds: Int) async throws -> [EnqueueRow] {
        var file = 0
        func freshStore(indexed: Bool = false) async throws -> Store {
            file += 1
            let store = try Store(path: folder.appending(path: "enqueue-\(file).sqlite").path, migrator: migrator)
            if indexed { try await store.write { db in try db.execute(sql: "CREATE INDEX depotOutbox_state ON depotOutbox(state)") } }
            return store
        }
        let scenarios: [(String, (Int, Int) async throws -> EnqueueRun)] = [
            ("raw GRDB, one transaction per mutation", { round, n in try await rawPerTransaction(store: freshStore(), round: round, count: n) }),
            ("raw GRDB, all in one transaction", { round, n in try await rawOneTransaction(store: freshStore(), round: round, count: n) }),
            ("Depot Outbox.send, offline controller", { round, n in try await depotSend(store: freshStore(), round: round, count: n, notifications: true) }),
            ("Depot Outbox.send, offline, no notifications", { round, n in try await depotSend(store: freshStore(), round: round, count: n, notifications: false) }),
            ("diagnostic: raw, a transaction + Outbox.snapshot() per mutation", { round, n in try await rawPerTransaction(store: freshStore(), round: round, count: n, then: .snapshot) }),
            ("diagnostic: raw, a transaction + a bare read per mutation", { round, n in try await rawPerTransaction(store: freshStore(), round: round, count: n, then: .bareRead) }),
            ("diagnostic: raw, the snapshot's two queries inside each transaction", { round, n in try await rawPerTransaction(store: freshStore(), round: round, count: n, then: .countsInTransaction) }),
            ("diagnostic: the same, prepared statements and an index on depotOutbox(state)", { round, n in try await rawPerTransaction(store: freshStore(indexed: true), round: round, count: n, then: .preparedCountsInTransaction) }),
        ]
        print("1. durable enqueue: \(count) mutations into a fresh store file per run")
        for (_, body) in scenarios { _ = try await body(-1, min(count, 200)) }  // warm up
        var runs: [String: [EnqueueRun]] = [:]
        // Rounds, every scenario once per round, starting one later each round
        // so that no scenario always runs first.
        for round in 0..<rounds {
            for offset in 0..<scenarios.count {
                let (name, body) = scenarios[(round + offset) % scenarios.count]
                let run = try await body(round, count)
                runs[name, default: []].append(run)
                let perSend = run.wall / Double(count)
                print(String(format: "  round %d  %@ %8.1f µs per mutation  %7.1f µs CPU", round + 1, name.padding(toLength: 66, withPad: " ", startingAt: 0) as NSString, perSend * 1e6, run.cpu / Double(count) * 1e6))
            }
        }
        return scenarios.map { EnqueueRow(name: $0.0, runs: runs[$0.0] ?? []) }
    }

    /// Times `count` calls of `body`, one after the other.
    static func timed(count: Int, _ body: (Int) async throws -> Void) async rethrows -> EnqueueRun {
        var latencies: [Double] = []
        latencies.reserveCapacity(count)
        let cpu = TransportBench.cpuSeconds(children: false)
        let start = ContinuousClock.now
        var last = start
        for index in 0..<count {
            try await body(index)
            let now = ContinuousClock.now
            latencies.append((now - last).seconds)
            last = now
        }
        return EnqueueRun(wall: (last - start).seconds, cpu: TransportBench.cpuSeconds(children: false) - cpu, latencies: latencies)
    }

    /// What `send` writes, written directly: the outbox row (same statement,
    /// same table, payload encoded the same way, a fresh UUID key) and the
    /// optimistic row, one `DatabasePool.write` transaction per mutation.
    enum After { case nothing, snapshot, bareRead, countsInTransaction, preparedCountsInTransaction }

    /// `then` adds, after each transaction, what `send` reads after its own
    /// (`Outbox.snapshot()`, on an outbox that sends nothing), or the
    /// cheapest read through the same API (`SELECT 1`); or runs the
    /// snapshot's two queries inside the transaction (a suggested fix):
    /// diagnostics.
    static func rawPerTransaction(store: Store, round: Int, count: Int, then after: After = .nothing) async throws -> EnqueueRun {
        let encoder = encoder()
        let controller = after == .snapshot ? offlineController(store: store) : nil
        let outbox = controller.map { Outbox(store: store, controller: $0, types: [SendPost.self]) }
        let run = try await timed(count: count) { index in
            let mutation = makeMutation(index, round: round)
            let payload = try encoder.encode(mutation.payload)
            let key = UUID().uuidString
            let now = Date()
            let lane = mutation.lane
            _ = try await store.writer.write { db in
                try db.execute(sql: insertOutboxSQL, arguments: [SendPost.typeName, lane, payload, key, now])
                let id = db.lastInsertedRowID
                try mutation.applyOptimistically(db)
                if after == .countsInTransaction {
                    _ = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM depotOutbox WHERE state = 'pending'")
                    _ = try Row.fetchAll(db, sql: "SELECT * FROM depotOutbox WHERE state = 'failed' ORDER BY id").count
                }
                if after == .preparedCountsInTransaction {
                    _ = try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM depotOutbox WHERE state = 'pending'"))
                    _ = try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM depotOutbox WHERE state = 'failed' ORDER BY id")).count
                }
                return id
            }
            switch after {
            case .nothing, .countsInTransaction, .preparedCountsInTransaction: break
            case .snapshot: _ = try await outbox?.snapshot()
            case .bareRead: _ = try await store.read { db in try Int.fetchOne(db, sql: "SELECT 1") }
            }
        }
        try await check(store, pending: count)
        if let controller {
            _ = await controller.shutdown(grace: .zero)
            await outbox?.waitUntilIdle()
        }
        try await store.close()
        return run
    }

    /// The same rows, all in one transaction: the cost of the rows themselves.
    static func rawOneTransaction(store: Store, round: Int, count: Int) async throws -> EnqueueRun {
        let cpu = TransportBench.cpuSeconds(children: false)
        let start = ContinuousClock.now
        try await store.writer.write { db in
            let encoder = encoder()
            for index in 0..<count {
                let mutation = makeMutation(index, round: round)
                try db.execute(sql: insertOutboxSQL, arguments: [SendPost.typeName, mutation.lane, try encoder.encode(mutation.payload), UUID().uuidString, Date()])
                try mutation.applyOptimistically(db)
            }
        }
        let wall = (ContinuousClock.now - start).seconds
        let run = EnqueueRun(wall: wall, cpu: TransportBench.cpuSeconds(children: false) - cpu, latencies: Array(repeating: wall / Double(count), count: count))
        try await check(store, pending: count)
        try await store.close()
        return run
    }

    static func depotSend(store: Store, round: Int, count: Int, notifications: Bool) async throws -> EnqueueRun {
        let controller = offlineController(store: store, notifications: notifications)
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        let run = try await timed(count: count) { index in
            try await outbox.send(makeMutation(index, round: round))
        }
        try await check(store, pending: count)
        _ = await controller.shutdown(grace: .zero)
        await outbox.waitUntilIdle()
        try await store.close()
        return run
    }

    /// Every mutation queued once, with its pending row.
    static func check(_ store: Store, pending: Int) async throws {
        let (entries, rows) = try await store.read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM depotOutbox") ?? 0, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM post WHERE isPending") ?? 0)
        }
        precondition(entries == pending && rows == pending, "expected \(pending) queued mutations, found \(entries) entries and \(rows) pending rows")
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    static func percentile(_ values: [Double], _ q: Double) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))]
    }

    static func enqueueTable(_ rows: [EnqueueRow], count: Int) -> String {
        let perTransaction = rows.first { $0.name == "raw GRDB, one transaction per mutation" }
        let oneTransaction = rows.first { $0.name.hasPrefix("raw GRDB, all in one") }
        var lines = [
            "Durable enqueue, \(count) mutations, \(rows.first?.runs.count ?? 0) rounds: per mutation (wall time of the run / \(count)), median over rounds [min to max]",
            "",
            "| path | per mutation | CPU per mutation | single calls p50 / p99 | first 100 / last 100 calls | vs raw, a transaction per mutation | vs raw, one transaction |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows {
            let perSend = row.perSend
            let cpu = row.runs.map { $0.cpu / Double(count) }
            let all = row.runs.flatMap(\.latencies)
            let single = row.name.contains("all in one") ? "–" : String(format: "%.1f / %.1f µs", percentile(all, 0.5) * 1e6, percentile(all, 0.99) * 1e6)
            let firstLast = row.name.contains("all in one") ? "–" : String(format: "%.1f / %.1f µs",
                median(row.runs.map { $0.latencies.prefix(100).reduce(0, +) / 100 }) * 1e6,
                median(row.runs.map { $0.latencies.suffix(100).reduce(0, +) / 100 }) * 1e6)
            // Paired by round: each round's run against the baseline's run of the same round.
            func versus(_ base: EnqueueRow?) -> String {
                guard let base, base.name != row.name else { return "–" }
                let ratios = zip(perSend, base.perSend).map { $0 / $1 }
                return String(format: "%.2f× (%.2f to %.2f)", median(ratios), ratios.min() ?? .nan, ratios.max() ?? .nan)
            }
            lines.append(String(format: "| %@ | %.1f µs [%.1f to %.1f] | %.1f µs | %@ | %@ | %@ | %@ |",
                row.name as NSString, median(perSend) * 1e6, (perSend.min() ?? .nan) * 1e6, (perSend.max() ?? .nan) * 1e6,
                median(cpu) * 1e6, single as NSString, firstLast as NSString, versus(perTransaction) as NSString, versus(oneTransaction) as NSString))
        }
        lines.append("")
        lines.append("\"vs raw\": median of per-round ratios of the per-mutation times (min to max). The target (≤ 1.5× raw) is read against")
        lines.append("\"a transaction per mutation\": send commits before it returns, so each send is one transaction.")
        return lines.joined(separator: "\n")
    }

    // MARK: - 2. Replay over loopback

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
    static func rawReplay(folder: URL, base: URL, server: ServerProcess, round: Int, count: Int, lanes: Int, snapshots: Bool = false) async throws -> ReplayRun {
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
                        let next = try await store.read { db -> (id: Int64, payload: Data, key: String)? in
                            try Row.fetchOne(db, sql: "SELECT id, payload, idempotencyKey FROM depotOutbox WHERE lane = ? AND state = 'pending' ORDER BY id LIMIT 1", arguments: [laneName])
                                .map { ($0["id"], $0["payload"], $0["idempotencyKey"]) }
                        }
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

    // MARK: - Profile: what one send and one delivery cost in statements

    /// Counts the SQL statements each connection runs (GRDB's statement trace,
    /// not timed), and times `Outbox.snapshot()`, which `send` and every
    /// delivery step read to publish the outbox's state.
    static func profile(folder: URL, count: Int) async throws {
        let counter = StatementCounter()
        var configuration = GRDB.Configuration()
        configuration.prepareDatabase { db in
            let connection = db.description.contains("reader") ? "reader" : "writer"
            db.trace(options: .statement) { event in
                if case .statement(let statement) = event { counter.add(connection, statement.sql) }
            }
        }
        print("\n3. profile (GRDB statement trace, not timed): statements per mutation by connection")
        let path = folder.appending(path: "profile.sqlite").path
        let store = try Store(path: path, migrator: migrator, configuration: configuration)
        _ = counter.take()
        for index in 0..<count { try await rawWrite(store: store, index: index) }
        counter.report("raw, a transaction per mutation", per: count)
        let transport = FixtureTransport()
        let controller = offlineController(store: store, notifications: false, transport: transport)
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        _ = counter.take()
        for index in 0..<count { try await outbox.send(makeMutation(index, round: 99)) }
        counter.report("Outbox.send", per: count)
        print("  requests the offline transport saw during the \(count) sends: \(transport.requests.count) (the lane's first entry, waiting for the network)")

        _ = await controller.shutdown(grace: .zero)
        await outbox.waitUntilIdle()
        try await store.close()

        try await timeParts(folder: folder, count: count)

        // Delivery: queue offline, replay against the bench server, count.
        let server = try ServerProcess.start()
        defer { server.stop() }
        let base = URL(string: "http://127.0.0.1:\(server.port)")!
        let replayPath = folder.appending(path: "profile-replay.sqlite").path
        do {
            let store = try Store(path: replayPath, migrator: migrator)
            let controller = offlineController(store: store, notifications: false)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            for index in 0..<count { try await outbox.send(makeMutation(index, round: 98, lanes: 8)) }
            _ = await controller.shutdown(grace: .zero)
            await outbox.waitUntilIdle()
            try await store.close()
        }
        let online = try Store(path: replayPath, migrator: migrator, configuration: configuration)
        var onlineConfiguration = NetworkController.Configuration(baseURL: base, transport: AsyncHTTPClientTransport(), limits: .init(concurrency: .fixed(8)))
        onlineConfiguration.store = online
        let onlineController = NetworkController(configuration: onlineConfiguration)
        let onlineOutbox = Outbox(store: online, controller: onlineController, types: [SendPost.self])
        _ = counter.take()
        try await onlineOutbox.start()
        await onlineOutbox.waitUntilIdle()
        counter.report("delivery (start() to idle, 8 lanes)", per: count)
        _ = await onlineController.shutdown(grace: .zero)
        await onlineOutbox.waitUntilIdle()
        try await online.close()
    }

    /// The raw path's transaction, for the statement count.
    static func rawWrite(store: Store, index: Int) async throws {
        let mutation = makeMutation(index, round: 97)
        let payload = try encoder().encode(mutation.payload)
        let key = UUID().uuidString
        let now = Date()
        let lane = mutation.lane
        try await store.writer.write { db in
            try db.execute(sql: insertOutboxSQL, arguments: [SendPost.typeName, lane, payload, key, now])
            try mutation.applyOptimistically(db)
        }
    }

    /// The parts of a send, timed on an untraced store: a bare read and write
    /// transaction through GRDB's async API, and `Outbox.snapshot()` (two
    /// queries over the outbox table: the pending count and the failed rows,
    /// neither indexed by state) with nothing and with `count` entries queued.
    static func timeParts(folder: URL, count: Int) async throws {
        let store = try Store(path: folder.appending(path: "parts.sqlite").path, migrator: migrator)
        let controller = offlineController(store: store, notifications: false)
        let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
        func time(_ body: () async throws -> Void) async rethrows -> Double {
            var times: [Double] = []
            for _ in 0..<300 {
                let start = ContinuousClock.now
                try await body()
                times.append((ContinuousClock.now - start).seconds)
            }
            return median(times)
        }
        let read = try await time { _ = try await store.read { db in try Int.fetchOne(db, sql: "SELECT 1") } }
        let write = try await time { try await store.write { db in try db.execute(sql: "UPDATE post SET isPending = isPending WHERE 0") } }
        let empty = try await time { _ = try await outbox.snapshot() }
        for index in 0..<count { try await outbox.send(makeMutation(index, round: 96)) }
        let full = try await time { _ = try await outbox.snapshot() }
        let countOnly = try await time { _ = try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM depotOutbox WHERE state = 'pending'") } }
        print(String(format: "  medians of 300 calls, untraced: store.read { SELECT 1 } %.1f µs; an empty store.write %.1f µs; Outbox.snapshot() %.1f µs with none queued, %.1f µs with %d queued (its pending COUNT(*) alone %.1f µs)",
            read * 1e6, write * 1e6, empty * 1e6, full * 1e6, count, countOnly * 1e6))
        _ = await controller.shutdown(grace: .zero)
        await outbox.waitUntilIdle()
        try await store.close()
    }

    final class StatementCounter: Sendable {
        let counts = Mutex<[String: Int]>([:])

        func add(_ connection: String, _ sql: String) {
            let words = sql.split(whereSeparator: { $0 == " " || $0 == "\n" }).prefix(3).map { $0.uppercased() }
            var kind = words.first ?? "?"
            if kind == "SELECT", sql.uppercased().contains("COUNT(*)") { kind = "SELECT COUNT(*)" }
            if kind == "BEGIN" || kind == "COMMIT" || kind == "ROLLBACK" || kind == "PRAGMA" || kind == "SAVEPOINT" || kind == "RELEASE" {
                kind = words.prefix(2).joined(separator: " ")
            }
            counts.withLock { $0["\(connection): \(kind)", default: 0] += 1 }
        }

        func take() -> [String: Int] {
            counts.withLock { counts in
                defer { counts = [:] }
                return counts
            }
        }

        func report(_ label: String, per count: Int) {
            let counts = take()
            let parts = counts.sorted { $0.key < $1.key }.map { String(format: "%@ %.2f", $0.key as NSString, Double($0.value) / Double(count)) }
            print("  \(label): " + parts.joined(separator: ", "))
        }
    }
}
