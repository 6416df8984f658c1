import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import NIOCore
import Synchronization

/// The first half of `depot-bench outbox`: how long `Outbox.send` takes to
/// make a mutation durable, offline, against raw GRDB writing the same rows.
extension OutboxBench {
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
}
