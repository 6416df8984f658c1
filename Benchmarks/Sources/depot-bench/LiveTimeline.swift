#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Depot
import DepotStore
import Foundation
import GRDB

/// depot-server's Timeline as the live benchmarks see it: its post record,
/// schema and change feed, written against Depot's public API.
///
/// It mirrors TimelineKit's `TimelinePost`, `TimelineSchema` (the `post`
/// table) and `TimelineFeed` (the same requests, decoding and writes), which
/// this package cannot import: the root package makes products of the four
/// libraries only. Keep it in step with `Sources/TimelineKit/TimelineFeed.swift`.
enum LiveTimeline {
    /// A post, as cached.
    struct Post: Codable, Sendable, Hashable, Identifiable, FetchableRecord, PersistableRecord {
        var id: Int
        var author: String
        var text: String
        var avatar: String
        static let databaseTableName = "post"

        /// Newest first, at most `limit`: what a timeline screen shows.
        static func newest(_ limit: Int) -> QueryInterfaceRequest<Post> {
            Post.order(Column("id").desc).limit(limit)
        }
    }

    /// The `post` table, as TimelineKit's first migration makes it.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("timeline-v1") { db in
            try db.create(table: Post.databaseTableName) { t in
                t.primaryKey("id", .integer)
                t.column("author", .text).notNull()
                t.column("text", .text).notNull()
                t.column("avatar", .text).notNull()
            }
        }
        return migrator
    }

    enum Change: Sendable, Hashable {
        case post(Post)
        case delete(id: Int)
    }

    /// TimelineKit's `TimelineFeed`: `/timeline/changes?since=N&limit=M`,
    /// `/timeline/events`, and `/timeline?limit=N` with `Change-Cursor`.
    struct Feed: ChangeFeed {
        var pageSize = 500
        var fullSyncLimit = 100_000

        var syncKey: String { "timeline:feed" }
        var priority: Priority { .high }
        var snapshotRequest: NetworkRequest { .get("timeline", query: ["limit": "\(fullSyncLimit)"]) }
        var eventsRequest: NetworkRequest? { .get("timeline/events") }

        func changesRequest(after cursor: String) -> NetworkRequest {
            .get("timeline/changes", query: ["since": cursor, "limit": "\(pageSize)"])
        }

        func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<Change> {
            guard let cursor = response.headers["Change-Cursor"], Int(cursor) != nil else {
                throw DepotError(.decoding, status: response.status, detail: "GET /timeline sent no Change-Cursor header")
            }
            return ChangePage(try response.decode([Post].self).map(Change.post), cursor: cursor)
        }

        struct Page: Decodable {
            struct Entry: Decodable {
                var seq: Int
                var change: String
                var post: Post?
                var id: Int?
            }

            var changes: [Entry]
            var cursor: Int
            var more: Bool
        }

        func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<Change> {
            let page = try response.decode(Page.self)
            let changes = try page.changes.map { entry throws(DepotError) -> Change in
                switch (entry.change, entry.post, entry.id) {
                case ("post", let post?, _): return .post(post)
                case ("delete", _, let id?): return .delete(id: id)
                default: throw DepotError(.decoding, status: response.status, detail: "change \(entry.seq) is neither a post nor a delete")
                }
            }
            return ChangePage(changes, cursor: String(page.cursor), more: page.more)
        }

        struct Deleted: Decodable {
            var id: Int
        }

        func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<Change> {
            let data = Data(event.data.utf8)
            switch event.type {
            case "post": return .changes([.post(try JSONDecoder().decode(Post.self, from: data))])
            case "delete": return .changes([.delete(id: try JSONDecoder().decode(Deleted.self, from: data).id)])
            case "reset": return .startOver
            default: return .ignore
            }
        }

        func apply(_ change: Change, to db: Database) throws {
            switch change {
            case .post(let post): try post.save(db)
            case .delete(let id): _ = try Post.deleteOne(db, key: id)
            }
        }

        func removeAll(from db: Database) throws {
            _ = try Post.deleteAll(db)
        }
    }

    /// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process on the
    /// machine, unlike `ContinuousClock`'s instants, which cannot leave a process.
    static func monotonicNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// The `q` quantile (0...1) of `values`, nearest rank; NaN when empty.
    static func quantile(_ values: [Double], _ q: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let rank = Int((q * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }

    /// A new empty folder under the temporary directory.
    static func temporaryFolder(_ name: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }
}
