import Depot
import DepotStore
import Foundation
import GRDB

/// One page of the timeline: the newest posts (`GET timeline?limit=N`), or
/// those older than a post the cache has (`GET timeline?before=ID&limit=N`).
/// Posts are upserted by id, so a post that two pages list is one row.
///
/// ``TimelinePages`` makes these for ``TimelineApp/pages``.
///
/// For example:
///
/// ```swift
/// let older = try await controller.perform(FetchTimelinePage(before: 21, limit: 20))
/// print(older.written?.ids ?? [])
/// ```
public struct FetchTimelinePage: CachingOperation {
    /// The id the posts are older than; `nil` for the newest posts.
    public var before: Int?
    /// How many posts a page holds (the server accepts 1 to 200).
    public var limit: Int
    /// Wait for the network while offline, or fail at once.
    public var offlineBehavior: OfflineBehavior

    /// Makes the operation for the page of `limit` posts before `before`.
    public init(before: Int? = nil, limit: Int = TimelinePages.defaultLimit, offlineBehavior: OfflineBehavior = .waitForConnectivity) {
        self.before = before
        self.limit = max(1, min(limit, 200))
        self.offlineBehavior = offlineBehavior
    }

    /// `GET timeline?limit=N`, with `before=ID` for older posts.
    public var request: NetworkRequest {
        var request = NetworkRequest.get("timeline", query: ["limit": "\(limit)"])
        if let before { request.query.append(URLQueryItem(name: "before", value: "\(before)")) }
        return request
    }
    /// `timeline` for the newest posts (the key ``FetchTimeline`` keeps too),
    /// `timeline:before=ID` for older ones.
    public var cacheKey: String { before.map { "timeline:before=\($0)" } ?? "timeline" }
    /// `.high` for the newest posts, `.normal` for older ones.
    public var priority: Priority { before == nil ? .high : .normal }
    /// ``OperationCategory/timeline``.
    public var category: OperationCategory { .timeline }
    /// `FetchTimeline` for the newest posts (what traces and errors have
    /// always called the timeline's fetch), `FetchOlderPosts` for the rest.
    public var name: String { before == nil ? "FetchTimeline" : "FetchOlderPosts" }

    /// Decodes the JSON array of posts.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [TimelinePost] {
        try response.decode([TimelinePost].self)
    }

    /// Upserts the posts. A full page continues before its oldest post; a
    /// short one is the end of the timeline.
    public func write(_ posts: [TimelinePost], to db: Database) throws -> PageContents<Int> {
        for post in posts { try post.upsert(db) }
        let next = posts.count < limit ? nil : posts.last.map { PagePosition.before(id: $0.id) }
        return PageContents(ids: posts.map(\.id), next: next)
    }
}

/// The timeline as a paged list: the newest posts first, then older ones
/// a page at a time, by the id of the oldest post loaded.
///
/// For example:
///
/// ```swift
/// let timeline = try controller.pagedResults(for: TimelineEntry.newestFirst(limit: .max), pages: TimelinePages(limit: 20))
/// await timeline.loadNextPage()   // the twenty posts before the oldest on screen
/// ```
public struct TimelinePages: PageableEndpoint {
    /// Fifty posts a page: what ``FetchTimeline`` asks for.
    public static let defaultLimit = 50

    /// How many posts a page holds.
    public var limit: Int
    /// Wait for the network while offline, or fail at once.
    public var offlineBehavior: OfflineBehavior

    /// Makes the timeline's pages.
    public init(limit: Int = TimelinePages.defaultLimit, offlineBehavior: OfflineBehavior = .waitForConnectivity) {
        self.limit = limit
        self.offlineBehavior = offlineBehavior
    }

    /// `timeline`.
    public var pagingKey: String { "timeline" }
    /// The newest posts.
    public var firstPage: PagePosition { .start }

    /// The newest posts at `.start`, older ones at `.before(id:)`.
    /// - Throws: `.invalidPage` for a position the timeline never gives.
    public func operation(for position: PagePosition) throws -> FetchTimelinePage {
        if position.isStart { return FetchTimelinePage(limit: limit, offlineBehavior: offlineBehavior) }
        guard let before = position.beforeID.flatMap(Int.init) else {
            throw DepotError(.invalidPage, detail: "the timeline pages by post id, not by \(position)")
        }
        return FetchTimelinePage(before: before, limit: limit, offlineBehavior: offlineBehavior)
    }

    /// Deletes the posts a fresh first page no longer reaches.
    public func removeItems(_ ids: [Int], from db: Database) throws {
        _ = try TimelinePost.deleteAll(db, keys: ids)
    }
}
