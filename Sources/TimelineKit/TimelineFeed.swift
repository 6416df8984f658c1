import Depot
import DepotStore
import Foundation
import GRDB

/// One change to the timeline, as depot-server numbers them.
public enum TimelineChange: Sendable, Hashable {
    /// A post was created (or written again).
    case post(TimelinePost)
    /// The post with this id was deleted.
    case delete(id: Int)
}

/// The timeline's change feed: `GET /timeline/changes?since=N` to catch up,
/// `GET /timeline/events` (server-sent events) while live, and
/// `GET /timeline` with its `Change-Cursor` header for a full sync.
///
/// Sequence numbers are the cursor. Events are `post` (the post's JSON),
/// `delete` (`{"id": N}`) and `reset` (the server cannot resume: catch up).
public struct TimelineFeed: ChangeFeed {
    /// Changes asked for per page when catching up.
    public var pageSize: Int
    /// How many posts a full sync keeps: the newest ones.
    public var fullSyncLimit: Int

    /// Makes the feed.
    public init(pageSize: Int = 500, fullSyncLimit: Int = 100_000) {
        self.pageSize = pageSize
        self.fullSyncLimit = fullSyncLimit
    }

    /// The ledger key of the feed: the timeline's.
    public static let syncKey = "timeline:feed"

    public var syncKey: String { Self.syncKey }
    public var priority: Priority { .high }
    public var category: OperationCategory { .timeline }
    public var snapshotRequest: NetworkRequest { .get("timeline", query: ["limit": "\(fullSyncLimit)"]) }
    public var eventsRequest: NetworkRequest? { .get("timeline/events") }

    public func changesRequest(after cursor: String) -> NetworkRequest {
        .get("timeline/changes", query: ["since": cursor, "limit": "\(pageSize)"])
    }

    public func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<TimelineChange> {
        guard let cursor = response.headers["Change-Cursor"], Int(cursor) != nil else {
            throw DepotError(.decoding, status: response.status, detail: "GET /timeline sent no Change-Cursor header")
        }
        return ChangePage(try response.decode([TimelinePost].self).map(TimelineChange.post), cursor: cursor)
    }

    struct Page: Decodable {
        struct Change: Decodable {
            var seq: Int
            var change: String
            var post: TimelinePost?
            var id: Int?
        }

        var changes: [Change]
        var cursor: Int
        var more: Bool
    }

    public func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<TimelineChange> {
        let page = try response.decode(Page.self)
        let changes = try page.changes.map { change throws(DepotError) -> TimelineChange in
            switch (change.change, change.post, change.id) {
            case ("post", let post?, _): return .post(post)
            case ("delete", _, let id?): return .delete(id: id)
            default: throw DepotError(.decoding, status: response.status, detail: "change \(change.seq) is neither a post nor a delete")
            }
        }
        return ChangePage(changes, cursor: String(page.cursor), more: page.more)
    }

    struct Deleted: Decodable {
        var id: Int
    }

    public func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<TimelineChange> {
        let data = Data(event.data.utf8)
        switch event.type {
        case "post": return .changes([.post(try JSONDecoder().decode(TimelinePost.self, from: data))])
        case "delete": return .changes([.delete(id: try JSONDecoder().decode(Deleted.self, from: data).id)])
        case "reset": return .startOver
        default: return .ignore
        }
    }

    public func apply(_ change: TimelineChange, to db: Database) throws {
        switch change {
        case .post(let post): try post.save(db)
        case .delete(let id): _ = try TimelinePost.deleteOne(db, key: id)
        }
    }

    public func removeAll(from db: Database) throws {
        _ = try TimelinePost.deleteAll(db)
    }
}
