import Depot
import DepotStore
import Foundation
import GRDB

/// Fetches an RSS or Atom feed and merges its items into the `feedItem` table
/// by identity (its `guid` or Atom `id`, else its link, else a hash of what
/// it shows; see ``ParsedItem/id``): one operation type for the forum-feed endpoint.
///
/// Unchanged feeds cost a 304: the ledger's `ETag` and `Last-Modified` go out as
/// a conditional request. The feed is parsed as its bytes arrive and merged
/// batch by batch in the operation's one transaction (a
/// ``DepotStore/StreamingCachingOperation``), so over `AsyncHTTPClientTransport`
/// a feed of a million items syncs in the memory of a few chunks and batches;
/// the body is never held whole. A
/// feed that cannot be parsed fails with `.decoding`, and a body cut short with
/// the transfer's error: the transaction rolls back, and the cache stays
/// exactly as it was.
///
/// For example:
///
/// ```swift
/// let update = try await controller.perform(FetchForumFeed(url: feedURL))
/// if let merge = update.written { print(merge) }   // "3 new, 0 updated, 17 unchanged"
/// ```
public struct FetchForumFeed: StreamingCachingOperation {
    /// The feed's URL; its items are stored with it as their ``FeedItem/feed``.
    public let url: URL
    /// What happens with no network: wait for it (the default, for an app that
    /// stays open) or fail at once (a one-shot run that should say so and end).
    public let offlineBehavior: OfflineBehavior

    /// Makes the operation for the feed at `url`.
    public init(url: URL, offlineBehavior: OfflineBehavior = .waitForConnectivity) {
        self.url = url
        self.offlineBehavior = offlineBehavior
    }

    /// `GET` of the feed's URL.
    public var request: NetworkRequest { .get(url) }

    /// `feed:` and the feed's URL.
    public var cacheKey: String { "feed:\(url.absoluteString)" }

    /// Parses the body with ``FeedParser`` on another thread, resolving relative
    /// links against the URL the response came from, and merges each batch of
    /// items by identity as it comes; see ``FeedMerge``.
    public func write(_ response: NetworkResponse, to db: Database) throws -> FeedMerge {
        try FeedItem.merge(document: response.body, baseURL: response.url, feed: url.absoluteString, into: db)
    }

    /// Parses the body as it arrives with ``FeedParser/Incremental`` on another
    /// thread, and merges each batch of items by identity as it comes.
    public func write(_ body: StreamedBody, of response: NetworkResponse, to db: Database) throws -> FeedMerge {
        try FeedItem.merge(streaming: body, baseURL: response.url, feed: url.absoluteString, into: db)
    }
}

/// Fetches the top-songs chart (`topsongs/limit=N/json`, relative to the
/// controller's base URL) and caches it as one value, `[Song]` top first,
/// under `topsongs`: Depot keeps it in its own table, so the app has no table
/// or migration for it.
///
/// For example, the original's five-minute cache:
///
/// ```swift
/// let songs = try controller.value(for: FetchTopSongs(), policy: FetchTopSongs.cachePolicy)
/// songs.value        // [Song]?, nil before the first sync
/// ```
public struct FetchTopSongs: CachedValueOperation {
    /// How many songs to ask for (the server accepts 1 to 200).
    public let limit: Int

    /// The default chart length, as in the original.
    public static let defaultLimit = 10

    /// How long a fetched chart is good for: five minutes, as in the original.
    public static let maxAge: Duration = .seconds(300)

    /// Use the cached chart while it is younger than ``maxAge``; fetch otherwise.
    public static let cachePolicy = CachePolicy.cacheFirst(maxAge: maxAge)

    /// What happens with no network: wait for it (the default) or fail at once.
    public let offlineBehavior: OfflineBehavior

    /// Makes the operation for the top `limit` songs.
    public init(limit: Int = FetchTopSongs.defaultLimit, offlineBehavior: OfflineBehavior = .waitForConnectivity) {
        self.limit = limit
        self.offlineBehavior = offlineBehavior
    }

    /// `GET topsongs/limit=N/json`.
    public var request: NetworkRequest { .get("topsongs/limit=\(limit)/json") }

    /// `topsongs`: one chart in the cache, whatever its length.
    public var cacheKey: String { "topsongs" }

    /// Decodes the iTunes-shaped JSON into songs ranked from 1, top first. A
    /// song listed twice is kept once, at its higher rank: each song is one
    /// row of a list, told by its ``Song/id``.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Song] {
        var seen = Set<String>()
        return try TopSongsDocument.songs(from: response.body).filter { seen.insert($0.id).inserted }
    }
}
