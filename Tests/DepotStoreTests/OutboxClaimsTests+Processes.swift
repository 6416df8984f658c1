#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLITestSupport
import DemoServer
import Depot
import DepotAsyncHTTPClient
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// The issue's test: two processes drain ONE store, one is killed with
/// SIGKILL midway, and a server that ignores `Idempotency-Key` gets every
/// entry once, except the ones the killed process had out when it died.
extension OutboxClaimsTests {
    static let queued = 200
    static let lanes = 8

    @Test(.timeLimit(.minutes(2)))
    func twoProcessesSendEveryEntryOnceThoughOneIsKilled() async throws {
        guard let sender = Executables.url("depot-outbox-sender") else {
            Issue.record("depot-outbox-sender is not built")
            return
        }
        let folder = try Executables.temporaryFolder("outbox-claims")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "shared.sqlite").path

        // 200 tasks queued offline in 8 lanes.
        let queued = try await spawn(sender.path, ["enqueue", path, "\(Self.queued)", "\(Self.lanes)"])
        try #require(queued.status == 0, "\(queued.error)")
        let entries = try await Self.queuedEntries(path)
        try #require(entries.count == Self.queued)
        let idByName = Dictionary(uniqueKeysWithValues: entries.map { ($0.name, $0.id) })

        try await DemoServer.withRunning(.init(port: 0)) { server in
            // Two senders with 4 s claims (an attempt may take 2.7 s: enough on
            // a loaded machine); the first to have sent 15 is killed.
            let arguments = ["drain", path, server.baseURL.absoluteString, "4000"]
            let children = [try LiveChild.start(sender.path, arguments), try LiveChild.start(sender.path, arguments)]
            let (lines, sink) = AsyncStream.makeStream(of: (child: Int, line: String).self)
            let readers = children.enumerated().map { index, child in
                Task { for await line in child.output { sink.yield((index, line)) } }
            }
            Task {
                for reader in readers { await reader.value }
                sink.finish()
            }
            var logs: [[String]] = [[], []]
            var killed: Int?
            for await (child, line) in lines {
                logs[child].append(line)
                if killed == nil, logs[child].count(where: { $0.hasPrefix("sending ") }) >= 15 {
                    children[child].send(SIGKILL)
                    killed = child
                }
            }
            let statuses = [await children[0].exitStatus(), await children[1].exitStatus()]
            let victim = try #require(killed, "no sender sent 15 tasks")
            let survivor = 1 - victim
            #expect(statuses[victim] == 128 + SIGKILL)
            #expect(statuses[survivor] == 0)

            // What may have reached the server twice: what the killed sender
            // had out (it said "sending" and never "settled"), and any entry
            // whose attempt failed ("retry").
            func ids(_ log: [String], _ prefix: String) -> Set<Int64> {
                Set(log.compactMap { $0.hasPrefix(prefix) ? Int64($0.dropFirst(prefix.count)) : nil })
            }
            let sentByVictim = Set(logs[victim].compactMap { $0.hasPrefix("sending ") ? idByName[String($0.dropFirst(8))] : nil })
            let outAtKill = sentByVictim.subtracting(ids(logs[victim], "settled "))
            let retried = ids(logs[0], "retry ").union(ids(logs[1], "retry "))
            let mayRepeat = outAtKill.union(retried)

            let deliveries = server.currentStats.idempotencyKeys
            let retries = (logs[0] + logs[1]).filter { $0.hasPrefix("retry ") }.reduce(into: [Int64: Int]()) { counts, line in
                if let id = Int64(line.dropFirst(6)) { counts[id, default: 0] += 1 }
            }
            var repeated: Set<Int64> = []
            var sent: [Int64: Int] = [:]
            for entry in entries {
                let count = deliveries[entry.key]?["POST /tasks"] ?? 0
                sent[entry.id] = count
                #expect(count >= 1, "\(entry.name) never reached the server")
                if count > 1 { repeated.insert(entry.id) }
                // Once, and again only for an attempt that got no answer: the
                // killed sender's, or a retry.
                let allowed = 1 + (outAtKill.contains(entry.id) ? 1 : 0) + retries[entry.id, default: 0]
                #expect(count <= allowed, "\(entry.name) reached the server \(count) times")
            }
            #expect(repeated.isSubset(of: mayRepeat), "sent twice though not out at the kill nor retried: \(repeated.subtracting(mayRepeat).sorted())")
            // At most one entry per lane was out at the kill. (`outAtKill` may
            // hold more: a "settled" line comes a little after its commit.)
            #expect(repeated.subtracting(retried).count <= Self.lanes)
            // The server's tasks agree: each name as often as its key came.
            let names = try await Self.taskNames(server)
            for entry in entries {
                #expect(names[entry.name, default: 0] == sent[entry.id], "\(entry.name)")
            }
            #expect(try await Self.queuedEntries(path).isEmpty, "the store still has entries")
            print("outbox claims: sender \(victim) killed after \(sentByVictim.count) sends, \(outAtKill.count) out at the kill, \(repeated.count) sent twice, \(retried.count) retried; survivor sent \(logs[survivor].count(where: { $0.hasPrefix("sending ") }))")
        }
    }

    /// The entries in the store's outbox: id, key and task name.
    static func queuedEntries(_ path: String) async throws -> [(id: Int64, key: String, name: String)] {
        let store = try Store(path: path)
        struct Payload: Decodable { var name: String }
        let rows = try await store.read { db in
            try Row.fetchAll(db, sql: "SELECT id, idempotencyKey, payload FROM depotOutbox ORDER BY id").map { row -> (Int64, String, Data) in
                (row["id"], row["idempotencyKey"], row["payload"])
            }
        }
        try await store.close()
        return try rows.map { ($0.0, $0.1, try JSONDecoder().decode(Payload.self, from: $0.2).name) }
    }

    /// How many of the server's open tasks have each name.
    static func taskNames(_ server: DemoServer) async throws -> [String: Int] {
        let transport = AsyncHTTPClientTransport()
        let credentials = "Basic " + Data("admin:secret".utf8).base64EncodedString()
        let request = TransportRequest(url: server.baseURL.appending(path: "tasks"), method: .get, headers: ["Authorization": credentials], body: nil, timeout: .seconds(10))
        let response = try await transport.send(request)
        var body = Data()
        for try await chunk in response.body { body.append(chunk) }
        await transport.shutdown()
        struct Task: Decodable { var name: String }
        return try JSONDecoder().decode([Task].self, from: body).reduce(into: [:]) { $0[$1.name, default: 0] += 1 }
    }
}
