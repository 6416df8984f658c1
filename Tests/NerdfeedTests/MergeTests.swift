import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import NerdfeedKit

@Suite struct MergeTests {
    let fetch = FetchForumFeed(url: forumFeedURL)

    func merge(_ name: String, in store: Store) async throws -> FeedMerge? {
        try await StoreFixtures.perform(fetch, respondingWith: try fixture(name), in: store).written
    }

    @Test func mergeAddsAndUpdatesWithoutDuplicates() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            // Given the feed merged once
            #expect(try await merge("rss2.xml", in: store) == FeedMerge(inserted: 5, updated: 0, unchanged: 0))

            // When the same feed comes again, nothing changes
            #expect(try await merge("rss2.xml", in: store) == FeedMerge(inserted: 0, updated: 0, unchanged: 5))
            #expect(try await store.allItems().count == 5)

            // When a later version comes, the new post is added and the changed ones updated
            #expect(try await merge("rss2-changed.xml", in: store) == FeedMerge(inserted: 1, updated: 2, unchanged: 2))

            // Then nothing is duplicated, and the post that left the feed stays
            let items = try await store.allItems()
            #expect(items.count == 6)
            #expect(Set(items.map(\.id)).count == 6)
            #expect(try await store.item("https://forums.example.com/feeds/posts/103") != nil)
            #expect(try await store.item("https://forums.example.com/forum/posts/102")?.title == "Café & Cache: the sequel, part 2")
            #expect(try await store.item("https://forums.example.com/viewtopic.php?t=101&p=1")?.summary == "Solved: it fetched once.")
            #expect(items.allSatisfy { $0.feed == forumFeedURL.absoluteString })
        }
    }

    @Test func datesAtTheEdgeOfYear9999SurviveTheCache() async throws {
        // An offset can carry a date that is valid where written into year 10000
        // in UTC, which SQLite's date text cannot hold: reading it back would trap.
        let rss = """
            <rss version="2.0"><channel><title>Edge</title>
            <item><title>Last second</title><link>https://example.com/last</link><pubDate>Fri, 31 Dec 9999 23:59:59 GMT</pubDate></item>
            <item><title>Past the end in UTC</title><link>https://example.com/past</link><pubDate>Fri, 31 Dec 9999 23:00:00 -0500</pubDate></item>
            </channel></rss>
            """
        let file = FileManager.default.temporaryDirectory.appending(path: "depot-edge-\(UUID().uuidString).xml")
        try Data(rss.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            let written = try await StoreFixtures.perform(fetch, respondingWith: file, in: store).written
            #expect(written?.inserted == 2)
            #expect(try await store.item("https://example.com/last")?.published == utc("9999-12-31T23:59:59Z"))
            #expect(try await store.item("https://example.com/past")?.published == nil)
        }
    }

    @Test func newestFirstPutsUndatedItemsLast() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            _ = try await merge("rss2.xml", in: store)
            let ordered = try await store.read { db in try FeedItem.newestFirst(feed: forumFeedURL).fetchAll(db) }
            #expect(ordered.map(\.title) == [
                "Café & Cache: the sequel",  // 2003-06-11 07:30
                "Blocks",  // 2003-06-10 09:00
                "Web Services",  // 2003-06-10 04:00
                "Off Topic :: Hello",  // undated, by title
                "Tips & tricks: async let",  // undated
            ])
        }
    }

    @Test func readStateSurvivesEveryMerge() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            // Given a merged feed with two items read
            _ = try await merge("rss2.xml", in: store)
            let changed = "https://forums.example.com/viewtopic.php?t=101&p=1"
            let unchanged = "https://forums.example.com/forum/posts/104"
            #expect(try await store.markRead(changed))
            #expect(try await markRead(unchanged, in: store))

            // When the same feed and then a changed one are merged
            _ = try await merge("rss2.xml", in: store)
            #expect(try await store.item(changed)?.isRead == true)
            _ = try await merge("rss2-changed.xml", in: store)

            // Then both are still read, and the new item is unread
            #expect(try await store.item(changed)?.isRead == true)
            #expect(try await store.item(changed)?.summary == "Solved: it fetched once.")
            #expect(try await store.item(unchanged)?.isRead == true)
            #expect(try await store.item("https://forums.example.com/forum/posts/107")?.isRead == false)

            // And marking unread works; an unknown link says so
            #expect(try await store.markRead(changed, read: false))
            #expect(try await store.item(changed)?.isRead == false)
            #expect(try await store.markRead("https://nowhere.example.com/") == false)
        }
    }

    @Test(arguments: ["malformed.xml", "truncated.xml"])
    func badFeedLeavesTheTableExactlyAsItWas(_ name: String) async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            // Given a merged feed with one item read
            _ = try await merge("rss2.xml", in: store)
            try await store.markRead("https://forums.example.com/forum/posts/104")
            let before = try await store.allItems()
            let observed = Counter()
            let cancellable = DatabaseRegionObservation(tracking: FeedItem.all())
                .start(in: store.writer, onError: { _ in }, onChange: { _ in observed.increment() })
            defer { cancellable.cancel() }

            // When a broken feed comes
            let error = await #expect(throws: DepotError.self) { try await merge(name, in: store) }

            // Then it is a decoding error, the rows are exactly as before, and no commit touched them
            #expect(error?.code == .decoding)
            #expect(try await store.allItems() == before)
            #expect(observed.value == 0)
            // And the ledger keeps the failure for the sync status
            let entry = try await store.ledger.entry(for: fetch.cacheKey)
            #expect(entry?.lastError?.code == .decoding)
            #expect(entry?.lastError?.message.contains("line") == true)
        }
    }

    @Test func aLinkListedTwiceCountsOnceAndAKnownDateIsKept() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            let date = utc("2020-01-01T00:00:00Z")
            let first = try await store.write { db in
                try FeedItem.merge([
                    ParsedItem(link: "https://e.com/1", title: "One", published: date),
                    ParsedItem(link: "https://e.com/1", title: "One again"),
                ], feed: "f", into: db)
            }
            #expect(first == FeedMerge(inserted: 1, updated: 0, unchanged: 0))
            #expect(try await store.item("https://e.com/1")?.title == "One")

            // The feed stops giving a date: the one we know stays.
            let second = try await store.write { db in
                try FeedItem.merge([ParsedItem(link: "https://e.com/1", title: "One")], feed: "f", into: db)
            }
            #expect(second == FeedMerge(inserted: 0, updated: 0, unchanged: 1))
            #expect(try await store.item("https://e.com/1")?.published == date)
        }
    }

    // MARK: - Top songs

    @Test func topSongsReplaceTheChart() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            let written = try await StoreFixtures.perform(FetchTopSongs(), respondingWith: try fixture("topsongs.json"), in: store)
            #expect(written == .updated(3))
            let songs = try await store.read { db in try Song.byRank.fetchAll(db) }
            #expect(songs == [
                Song(id: "https://music.example.com/song/1001", rank: 1, title: "Fetch Twice - The Fetchers",
                     artist: "The Fetchers", link: "https://audio.example.com/1001.m4a"),
                Song(id: "https://music.example.com/song/1002", rank: 2, title: "Cache Me Outside - Cache Money",
                     artist: "Cache Money", link: "https://audio.example.com/1002.m4a"),
                // No id, one link given as an object, "artist" instead of "im:artist"
                Song(id: "https://music.example.com/song/1003", rank: 3, title: "Main Actor Blues - Main Actor",
                     artist: "Main Actor", link: "https://music.example.com/song/1003"),
            ])

            _ = try await StoreFixtures.perform(FetchTopSongs(), respondingWith: try fixture("topsongs-changed.json"), in: store)
            let after = try await store.read { db in try Song.byRank.fetchAll(db) }
            #expect(after.map(\.id) == ["https://music.example.com/song/1002", "https://music.example.com/song/1001"])
            #expect(after.map(\.rank) == [1, 2])
        }
    }

    @Test func aChartOfOneIsAnObjectNotAnArray() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            _ = try await StoreFixtures.perform(FetchTopSongs(limit: 1), respondingWith: try fixture("topsongs-one.json"), in: store)
            #expect(try await store.read { db in try Song.fetchAll(db) }.map(\.title) == ["Offline Again - Hummingbirds"])
        }
    }

    @Test func aBrokenChartKeepsTheOldOne() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            _ = try await StoreFixtures.perform(FetchTopSongs(), respondingWith: try fixture("topsongs.json"), in: store)
            let error = await #expect(throws: DepotError.self) {
                try await StoreFixtures.perform(FetchTopSongs(), respondingWith: try fixture("rss2.xml"), in: store)
            }
            #expect(error?.code == .decoding)
            #expect(try await store.read { db in try Song.fetchCount(db) } == 3)
        }
    }
}
