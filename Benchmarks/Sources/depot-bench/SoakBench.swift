import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization

/// Everything at once, in real time, for a given duration: 10,000 operations
/// kept queued on a simulated link whose quality cycles every minute, 1,000
/// results controllers observing the tables those operations write, random
/// cancellations, and a writer committing beside them. Reports RSS and the
/// longest main-actor stall each minute, and fails on a deadlock, a lost or
/// doubled completion, or RSS that is not flat.
///
/// Real parts: a SQLite file in a temporary folder (`Store`), the real
/// `NetworkController`, and `NetworkSimulator` on `ContinuousClock`.
enum SoakBench {
    static let queuedTarget = 10_000
    /// `DEPOT_SOAK_OBSERVERS=n` changes it, to see what the observers cost.
    static let observerCount = ProcessInfo.processInfo.environment["DEPOT_SOAK_OBSERVERS"].flatMap { Int($0) } ?? 1_000
    static let tableCount = 8
    static let feedCount = 512
    static let entriesPerFeed = 22
    /// The stall timer's period: a frame.
    static let framePeriod = Duration.milliseconds(16)
    /// Seconds of an online link, with work queued and no completion, that count as a deadlock.
    static let watchdogSeconds = 30
    /// Random `Ticket.cancel()` calls per 100 ms.
    static let cancelsPerTick = 2

    // MARK: The data

    /// A row of one of the `item0` … `item7` tables.
    struct Item: FetchableRecord, Identifiable, Equatable, Sendable {
        var id: Int
        var feed: Int
        var rank: Int
        var section: String
        var title: String
        var likes: Int

        init(id: Int, feed: Int, rank: Int, title: String) {
            (self.id, self.feed, self.rank, self.section, self.title, self.likes) = (id, feed, rank, rank < 10 ? "top" : "more", title, 0)
        }

        init(row: GRDB.Row) {
            (id, feed, rank, section, title, likes) = (row[0], row[1], row[2], row[3], row[4], row[5])
        }

        static var columns: [any SQLSelectable] { ["id", "feed", "rank", "section", "title", "likes"].map { Column($0) } }
        static func table(of feed: Int) -> String { "item\(feed % tableCount)" }
    }

    /// One element of a feed's JSON body.
    struct Entry: Codable, Sendable {
        var rank: Int
        var title: String
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("soak") { db in
            for table in 0..<tableCount {
                try db.create(table: "item\(table)") { t in
                    t.primaryKey("id", .integer)
                    t.column("feed", .integer).notNull()
                    t.column("rank", .integer).notNull()
                    t.column("section", .text).notNull()
                    t.column("title", .text).notNull()
                    t.column("likes", .integer).notNull()
                }
                try db.create(index: "item\(table)_feed", on: "item\(table)", columns: ["feed", "rank"])
            }
        }
        return migrator
    }

    static let feedBody = try! JSONEncoder().encode((0..<entriesPerFeed).map { rank in
        Entry(rank: rank, title: "Entry \(rank): " + String(repeating: "lorem ipsum ", count: 8))
    })

    // MARK: The operations

    /// Fetches a feed and writes its entries into its table (a 200), or
    /// revalidates it (`same/`, one URL per feed with an ETag: after its first
    /// 200 the request carries the ETag and gets a 304), or meets a server that
    /// always answers 503 (`flaky/`).
    struct FetchFeed: CachingOperation {
        typealias Payload = [Item]
        typealias Written = Int
        var feed: Int
        /// Varies the titles written; 0 makes a request that coalesces with others for the feed.
        var serial: Int
        var route = "feed"
        var revalidates = false
        var priority: Priority = .normal
        var exitPolicy: ExitPolicy = .cancel

        var request: NetworkRequest {
            if revalidates { return .get("same/\(feed)") }
            return serial == 0 ? .get("\(route)/\(feed)") : .get("\(route)/\(feed)", query: ["n": String(serial)])
        }
        var cacheKey: String { "feed-\(feed)" }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Item] {
            items(try JSONDecoder().decode([Entry].self, from: response.body))
        }

        /// 18 to 22 rows; about one title in seven differs from the plain one.
        func items(_ entries: [Entry]) -> [Item] {
            entries.prefix(18 + serial % 5).map { entry in
                let edited = serial != 0 && (entry.rank + serial) % 7 == 0
                return Item(id: feed * 32 + entry.rank, feed: feed, rank: entry.rank, title: edited ? "\(entry.title)#\(serial)" : entry.title)
            }
        }

        func write(_ items: [Item], to db: Database) throws -> Int {
            let table = Item.table(of: feed)
            let upsert = try db.cachedStatement(sql: """
                INSERT INTO \(table) (id, feed, rank, section, title, likes) VALUES (?, ?, ?, ?, ?, 0)
                ON CONFLICT(id) DO UPDATE SET title = excluded.title WHERE title != excluded.title
                """)
            for item in items { try upsert.execute(arguments: [item.id, item.feed, item.rank, item.section, item.title]) }
            try db.cachedStatement(sql: "DELETE FROM \(table) WHERE feed = ? AND rank >= ?").execute(arguments: [feed, items.count])
            return items.count
        }
    }

    /// A 48 KB image: low priority, paused and dropped when the link is poor.
    struct FetchImage: NetworkOperation {
        var serial: Int
        var request: NetworkRequest { .get("image/\(serial)") }
        var priority: Priority { .low }
        var category: OperationCategory { .images }
        var isDroppable: Bool { true }

        func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int { response.body.count }
    }

    // MARK: The link

    /// A `NetworkSimulator` on the real clock that cycles excellent (12 s) →
    /// good (13 s) → poor (25 s) → offline (10 s), replaced by a fresh one at
    /// each minute. A simulator keeps a record of every transfer for tests to
    /// read; over a soak that history would grow by about 200 bytes per transfer
    /// and show as RSS. Each one ends its minute offline, so none has a transfer
    /// open when it is replaced.
    final class Link: Transport {
        private let current: Mutex<NetworkSimulator>

        init() { current = Mutex(Self.makeSimulator()) }

        static func makeSimulator() -> NetworkSimulator {
            NetworkSimulator(
                clock: ContinuousClock(),
                link: .init(bandwidth: 8_000_000, rtt: .milliseconds(25)),
                routes: [
                    .init(path: "/feed/*", body: feedBody, latency: .milliseconds(5), headers: ["Content-Type": "application/json"]),
                    .init(path: "/same/*", body: feedBody, latency: .milliseconds(5), headers: ["ETag": "\"v1\"", "Content-Type": "application/json"]),
                    .init(path: "/flaky/*", status: 503, bytes: 0),
                    .init(path: "/image/*", bytes: 48_000),
                ],
                timeline: [
                    .bandwidth(1_500_000, at: .seconds(12)), .rtt(.milliseconds(80), at: .seconds(12)),
                    .bandwidth(100_000, at: .seconds(25)), .rtt(.milliseconds(300), at: .seconds(25)),
                    .offline(at: .seconds(50)),
                ],
                // A TCP segment's payload: with 16 KB chunks a 3 KB body arrives whole,
                // and the controller's link meter counts its bytes but none of its time.
                chunkSize: 1_460)
        }

        var simulator: NetworkSimulator { current.withLock { $0 } }

        func send(_ request: TransportRequest) async throws -> TransportResponse {
            try await simulator.send(request)
        }

        /// Starts a new cycle; returns how many transfers the old simulator saw.
        func rotate() -> Int {
            let fresh = Self.makeSimulator()
            let old = current.withLock { simulator in
                defer { simulator = fresh }
                return simulator
            }
            return old.records.count
        }
    }
}
