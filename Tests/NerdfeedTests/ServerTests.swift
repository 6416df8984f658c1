import DemoServer
import Depot
import DepotAsyncHTTPClient
@testable import DepotStore
import DepotTesting
import Foundation
import GRDB
import NerdfeedKit
import Testing

/// Nerdfeed against the real in-process DemoServer over HTTP on 127.0.0.1.
@Suite(.timeLimit(.minutes(1)))
@MainActor
struct ServerTests {
    /// Runs `body` with a server, a store and a controller over AsyncHTTPClient, and tears them down.
    func withSetup(
        server configuration: DemoServer.Configuration = .init(seed: 7, initialPosts: 20),
        date: ManualDate = ManualDate(),
        _ body: @MainActor (DemoServer, Store, NetworkController) async throws -> Void
    ) async throws {
        try await DemoServer.withRunning(configuration) { server in
            try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator, environment: .init(date: date.provider)) { store in
                try await withController(server: server, store: store) { controller in
                    try await body(server, store, controller)
                }
            }
        }
    }

    func requests(_ server: DemoServer, _ route: String) -> Int {
        server.currentStats.requests.filter { $0.key.contains(route) }.values.reduce(0, +)
    }

    func url(_ server: DemoServer, _ path: String) -> URL {
        server.baseURL.appending(path: path)
    }

    @Test func syncsTheForumRSSAndAtomFeedsAlike() async throws {
        try await withSetup { server, store, controller in
            // When the RSS feed is synced
            let feedURL = url(server, "forum/rss")
            let rss = try await controller.perform(FetchForumFeed(url: feedURL))
            #expect(rss.written == FeedMerge(inserted: 20, updated: 0, unchanged: 0))
            let items = try await store.read { db in try FeedItem.newestFirst(feed: feedURL).fetchAll(db) }
            #expect(items.count == 20)
            #expect(items.allSatisfy { $0.link?.hasPrefix(server.baseURL.absoluteString + "/forum/posts/") == true })
            #expect(items.allSatisfy { $0.id.hasPrefix("post-") })  // the RSS guid
            #expect(items.allSatisfy { !$0.title.contains("::") && $0.author != nil && $0.published != nil })
            #expect(items.first?.summary?.contains("&") == true)  // "&amp;" in the CDATA HTML, decoded
            #expect(items.first?.summary?.contains("<") == true)  // "&lt;see page N&gt;", decoded, not taken for a tag
            #expect(zip(items, items.dropFirst()).allSatisfy { $0.published! >= $1.published! })

            // Then the Atom feed of the same posts (relative links, RFC 3339 dates) reads the same,
            // as items of its own feed (a feed's items are its own, whatever their links)
            let atomURL = url(server, "forum/atom")
            let atom = try await controller.perform(FetchForumFeed(url: atomURL))
            #expect(atom.written == FeedMerge(inserted: 20, updated: 0, unchanged: 0))
            let atomItems = try await store.read { db in try FeedItem.newestFirst(feed: atomURL).fetchAll(db) }
            struct Shown: Equatable { var link: String?, title: String, author: String?, summary: String?, published: Date? }
            let shown = { (item: FeedItem) in Shown(link: item.link, title: item.title, author: item.author, summary: item.summary, published: item.published) }
            #expect(atomItems.map(shown) == items.map(shown))
        }
    }

    @Test func theAtomFeedAloneFillsItsOwnItems() async throws {
        try await withSetup { server, store, controller in
            let feedURL = url(server, "forum/atom")
            _ = try await controller.perform(FetchForumFeed(url: feedURL))
            let items = try await store.read { db in try FeedItem.newestFirst(feed: feedURL).fetchAll(db) }
            #expect(items.count == 20)
            #expect(items.allSatisfy { $0.id.hasPrefix(server.baseURL.absoluteString + "/forum/posts/") })  // the Atom id
            #expect(items.allSatisfy { $0.link?.hasPrefix(server.baseURL.absoluteString + "/forum/posts/") == true })
        }
    }

    @Test func anUnchangedFeedCostsA304AndANewPostIsMerged() async throws {
        let clock = ManualClock()
        let date = ManualDate()
        try await withSetup(server: .init(seed: 7, initialPosts: 20, clock: clock), date: date) { server, store, controller in
            let fetch = FetchForumFeed(url: url(server, "forum/rss"))
            _ = try await controller.perform(fetch)
            date.advance(by: 60)

            // When nothing changed on the server
            let again = try await controller.perform(fetch)

            // Then the server answered 304 and the ledger says the cache is current
            #expect(again == .notModified)
            #expect(server.currentStats.notModified == 1)
            #expect(try await store.ledger.entry(for: fetch.cacheKey)?.lastSynced == date.now)

            // When a new post appears, the next fetch merges it
            clock.advance(by: .seconds(60))
            let later = try await controller.perform(fetch)
            #expect(later.written == FeedMerge(inserted: 1, updated: 0, unchanged: 20))
            #expect(server.currentStats.notModified == 1)
        }
    }

    @Test func topSongsAreCachedForFiveMinutes() async throws {
        let date = ManualDate()
        try await withSetup(date: date) { server, store, controller in
            // Given a first sync of the chart
            let first = try controller.value(for: FetchTopSongs(), policy: FetchTopSongs.cachePolicy)
            #expect(first.syncStatus.needsRefresh, "an empty cache is refreshed")
            // Joins the refresh the policy started (or starts the one it is about to join).
            await first.syncStatus.refresh()
            #expect(requests(server, "topsongs") == 1)
            #expect(try await store.read { db in try FetchTopSongs().cachedValue(in: db) }?.count == 10)

            // When the chart is shown again within five minutes, no request is made
            date.advance(by: 299)
            let second = try controller.value(for: FetchTopSongs(), policy: FetchTopSongs.cachePolicy)
            #expect(second.value?.count == 10)
            #expect(!second.syncStatus.needsRefresh, "a chart younger than five minutes is not fetched")
            #expect(requests(server, "topsongs") == 1)

            // When it is shown after more than five minutes, it is fetched again (a 304: the chart did not change)
            date.advance(by: 2)
            let third = try controller.value(for: FetchTopSongs(), policy: FetchTopSongs.cachePolicy)
            #expect(third.syncStatus.needsRefresh, "an older chart is refreshed by the policy itself")
            await third.syncStatus.refresh()
            #expect(requests(server, "topsongs") == 2)
            #expect(server.currentStats.notModified == 1)
            #expect(third.syncStatus.lastSynced == date.now)
            #expect(third.value?.count == 10)
        }
    }

    /// A cache an earlier version synced holds the chart's ledger entry and
    /// the server's validators, but its songs were in the `song` table, which
    /// the upgrade drops: the chart comes back whole, at once.
    @Test func theChartAnEarlierVersionCachedComesBackAsAValue() async throws {
        struct EarlierFetchTopSongs: CachingOperation {
            var request: NetworkRequest { .get("topsongs/limit=10/json") }
            var cacheKey: String { "topsongs" }
            func write(_ response: NetworkResponse, to db: Database) throws {}
        }
        try await withSetup { server, store, controller in
            // Given the chart synced a moment ago by an earlier version
            _ = try await controller.perform(EarlierFetchTopSongs())

            // When this version shows it, within its five minutes
            let app = try NerdfeedApp(controller: controller, feedURL: url(server, "forum/rss"))
            #expect(app.songs.value == nil)

            // Then it is fetched whole (no 304 confirms a chart the cache does not hold) and shown
            let songs = await waitFor(app.songs) { $0 != nil }
            #expect(songs?.map(\.rank) == Array(1...10))
            #expect(requests(server, "topsongs") == 2)
            #expect(server.currentStats.notModified == 0)
        }
    }

    @Test func theAppSyncsBothAndCoalescesRefreshes() async throws {
        try await withSetup { server, store, controller in
            let feedURL = url(server, "forum/rss")
            let app = try NerdfeedApp(controller: controller, feedURL: feedURL, songsLimit: 5)

            // Two presses while the first sync runs join it
            async let first: Void = app.refresh()
            async let second: Void = app.refresh()
            _ = await (first, second)
            #expect(requests(server, "forum/rss") == 1)
            #expect(requests(server, "topsongs") == 1)
            #expect(app.feedStatus.lastSynced != nil && app.feedStatus.lastError == nil)
            #expect(app.songsStatus.lastSynced != nil && app.songsStatus.lastError == nil)

            // The results show the rows (delivered on the main actor once the commit is seen)
            let items = await waitFor(app.items) { $0.count == 20 }
            #expect(await waitFor(app.songs) { $0?.count == 5 }?.map(\.rank) == [1, 2, 3, 4, 5])

            // Marking an item read shows in the results and survives the next sync
            let top = try #require(items.first)
            await app.markRead(top)
            #expect(app.lastError == nil)
            _ = await waitFor(app.items) { rows in rows.first { $0.id == top.id }?.isRead == true }
            await app.refresh()
            #expect(try await store.item(id: top.id, feed: top.feed)?.isRead == true)
        }
    }

    @Test func offlineTheAppShowsTheCacheAndMakesNoRequest() async throws {
        try await withSetup { server, store, controller in
            _ = try await controller.perform(FetchForumFeed(url: url(server, "forum/rss")))
            let before = server.currentStats.requests.values.reduce(0, +)

            let app = try NerdfeedApp(controller: controller, feedURL: url(server, "forum/rss"), autoRefresh: .seconds(1), offline: true)
            #expect(app.items.refreshTask == nil && !app.songsStatus.needsRefresh, "offline results start no refresh")
            await app.refresh()

            #expect(app.items.fetchedObjects.count == 20)
            #expect(app.songs.value == nil)
            #expect(server.currentStats.requests.values.reduce(0, +) == before)
        }
    }

    @Test func theAppNeedsAStore() async throws {
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://127.0.0.1:9")!, transport: FixtureTransport()))
        let error = #expect(throws: DepotError.self) {
            _ = try NerdfeedApp(controller: controller, feedURL: URL(string: "http://127.0.0.1:9/forum/rss")!)
        }
        #expect(error?.code == .storage)
        _ = await controller.shutdown(grace: .zero)
    }

    /// The results' rows once `condition` holds (results deliver asynchronously after a commit).
    func waitFor<Record>(_ results: ResultsController<Record>, _ condition: ([Record]) -> Bool) async -> [Record]
    where Record: FetchableRecord & Identifiable & Equatable & Sendable, Record.ID: Sendable {
        for await update in results.updates() where condition(update.snapshot.fetchedObjects) {
            return update.snapshot.fetchedObjects
        }
        return results.fetchedObjects
    }

    /// The first value of `live` that satisfies `condition`, or the current one if its updates end.
    func waitFor<Value: Codable & Sendable>(_ live: LiveValue<Value>, _ condition: (Value?) -> Bool) async -> Value? {
        for await value in live.updates() where condition(value) {
            return value
        }
        return live.value
    }
}
