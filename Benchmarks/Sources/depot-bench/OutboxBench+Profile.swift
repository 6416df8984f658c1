import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import NIOCore
import Synchronization

/// `depot-bench outbox`'s diagnostics: the SQL statements one send and one
/// delivery run, and the time of the outbox's snapshot read.
extension OutboxBench {
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
