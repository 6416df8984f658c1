import Depot
import DepotStore
import Foundation
import GRDB
import Observation

/// The Nerdfeed reader's model: the forum feed as live results from the cache,
/// the top-songs chart as a live cached value, their sync statuses, refresh
/// and read state.
///
/// It is the view layer's one entry point. It reads only the cache; every
/// network call goes through the controller's operations (``FetchForumFeed``,
/// ``FetchTopSongs``). On start the feed shows what is cached and then
/// refreshes; the chart refreshes only when the cached one is older than five
/// minutes. Offline, nothing goes to the network and the cache is shown.
///
/// For example:
///
/// ```swift
/// var configuration = NetworkController.Configuration(baseURL: server, transport: AsyncHTTPClientTransport())
/// configuration.store = try Store(path: cacheFile.path, migrator: NerdfeedSchema.migrator)
/// let controller = NetworkController(configuration: configuration)
/// let app = try NerdfeedApp(controller: controller, feedURL: server.appending(path: "forum/rss"),
///                           autoRefresh: .seconds(60))
/// for await update in app.items.updates() { render(update.snapshot) }
/// ```
@MainActor
@Observable
public final class NerdfeedApp {
    /// The controller all network work goes through.
    public let controller: NetworkController
    /// The cache the controller's operations write to.
    public let store: Store
    /// The forum feed's URL.
    public let feedURL: URL
    /// Whether the app stays off the network and shows only the cache.
    public let isOffline: Bool
    /// The feed's newest items, newest first: at most the `itemLimit` given to ``init(controller:feedURL:songsLimit:itemLimit:autoRefresh:offline:waitsForNetwork:)``.
    public let items: ResultsController<FeedItem>
    /// The top songs, by rank: one cached value (`nil` before the first sync).
    public let songs: LiveValue<[Song]>
    /// Whether the feed is syncing, when it last synced, and its last error.
    public let feedStatus: SyncStatus
    /// Whether the chart is syncing, when it last synced, and its last error.
    public let songsStatus: SyncStatus
    /// The last failure of ``markRead(_:read:)``, cleared by its next success.
    public private(set) var lastError: DepotError?

    /// Builds the model and starts the first sync (unless offline).
    ///
    /// - Parameters:
    ///   - controller: The controller; its configuration must have a `store`
    ///     opened with ``NerdfeedSchema/migrator``.
    ///   - feedURL: The forum feed (RSS or Atom).
    ///   - songsLimit: How many top songs to show.
    ///   - itemLimit: How many of the feed's newest items ``items`` holds
    ///     (``defaultItemLimit``): a screen never needs a million rows, and a
    ///     feed may bring that many.
    ///   - autoRefresh: Refresh the feed this often (and the chart when it is
    ///     older than ``FetchTopSongs/maxAge``), and on reconnect; `nil` for manual refresh only.
    ///   - offline: Never go to the network: show the cache.
    ///   - waitsForNetwork: Whether a refresh waits out an offline spell (an app
    ///     that stays open) or fails at once with `.offline` (a one-shot run).
    /// - Throws: `.storage` if no store is configured or the first fetch from it fails.
    public init(controller: NetworkController, feedURL: URL, songsLimit: Int = FetchTopSongs.defaultLimit, itemLimit: Int = NerdfeedApp.defaultItemLimit, autoRefresh: Duration? = nil, offline: Bool = false, waitsForNetwork: Bool = true) throws(DepotError) {
        guard let store = controller.store else {
            throw DepotError(.storage, detail: "NerdfeedApp needs a store: set NetworkController.Configuration.store")
        }
        self.controller = controller
        self.store = store
        self.feedURL = feedURL
        self.isOffline = offline
        items = try controller.results(
            for: FeedItem.newestFirst(feed: feedURL).limit(max(0, itemLimit)),
            refreshing: FetchForumFeed(url: feedURL, offlineBehavior: waitsForNetwork ? .waitForConnectivity : .failFast),
            policy: offline ? .cacheOnly : .cacheThenNetwork)
        songs = try controller.value(
            for: FetchTopSongs(limit: songsLimit, offlineBehavior: waitsForNetwork ? .waitForConnectivity : .failFast),
            policy: offline ? .cacheOnly : FetchTopSongs.cachePolicy)
        guard let feedStatus = items.syncStatus else {
            throw DepotError(.storage, detail: "results came without a sync status")
        }
        self.feedStatus = feedStatus
        songsStatus = songs.syncStatus
        if let autoRefresh, !offline {
            feedStatus.autoRefresh(every: autoRefresh)
            songsStatus.autoRefresh(every: max(autoRefresh, FetchTopSongs.maxAge))
        }
    }

    /// How many of the newest items ``items`` holds unless told otherwise.
    public nonisolated static let defaultItemLimit = 1_000

    /// Refreshes the feed and the chart together and returns when both are done.
    /// A press while a refresh runs joins it instead of starting another.
    /// Failures land in ``feedStatus`` and ``songsStatus``; offline this does nothing.
    ///
    /// An explicit refresh fetches the chart even when it is younger than
    /// ``FetchTopSongs/maxAge``: the user asked. It is a conditional request,
    /// so an unchanged chart costs a 304.
    public func refresh() async {
        guard !isOffline else { return }
        async let feed: Void = feedStatus.refresh(force: true)
        async let chart: Void = songsStatus.refresh(force: true)
        _ = await (feed, chart)
    }

    /// Marks `item` as read (or unread). The flag survives every later merge of the feed.
    /// A failure lands in ``lastError``.
    public func markRead(_ item: FeedItem, read: Bool = true) async {
        do {
            try await store.markRead(item, read: read)
            lastError = nil
        } catch {
            lastError = error
        }
    }
}
