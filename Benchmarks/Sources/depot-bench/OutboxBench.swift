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
}
