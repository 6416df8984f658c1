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
            // Given the feed merged once (the item without a link too)
            #expect(try await merge("rss2.xml", in: store) == FeedMerge(inserted: 6, updated: 0, unchanged: 0))

            // When the same feed comes again, nothing changes
            #expect(try await merge("rss2.xml", in: store) == FeedMerge(inserted: 0, updated: 0, unchanged: 6))
            #expect(try await store.allItems().count == 6)

            // When a later version comes, the new post is added and the changed ones updated
            #expect(try await merge("rss2-changed.xml", in: store) == FeedMerge(inserted: 1, updated: 2, unchanged: 2))

            // Then nothing is duplicated, and the posts that left the feed stay
            let items = try await store.allItems()
            #expect(items.count == 7)
            #expect(Set(items.map(\.id)).count == 7)
            #expect(try await store.item(id: "post-105", feed: forumFeedURL.absoluteString)?.link == nil)
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
                "Orphan without a link",  // 2003-06-10 05:00
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

    /// The merge binds up to 64 rows a statement, in chunks of a power of
    /// two: 2,203 items are three batches of many chunk sizes, and a guid
    /// repeated in a later batch is merged once (the first), on the first
    /// sync and on the next.
    @Test func aFeedOfManyBatchesMergesEveryItemOnce() async throws {
        func document(retitled: Set<Int>) -> Data {
            var xml = "<rss version=\"2.0\"><channel><title>Many</title>"
            for index in 0..<2_203 {
                let guid = index == 2_100 ? 7 : index
                let title = retitled.contains(index) ? "Item \(index), again" : "Item \(index)"
                xml += "<item><guid>g\(guid)</guid><title>\(title)</title><link>https://e.com/\(index)</link></item>"
            }
            return Data((xml + "</channel></rss>").utf8)
        }
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            func merge(_ data: Data) async throws -> FeedMerge {
                try await store.write { db in try FeedItem.merge(document: data, baseURL: forumFeedURL, feed: "f", into: db) }
            }
            #expect(try await merge(document(retitled: [])) == FeedMerge(inserted: 2_202, updated: 0, unchanged: 0))
            let rows = try await store.read { db in try FeedItem.filter(FeedItem.Columns.feed == "f").fetchAll(db) }
            #expect(rows.count == 2_202)
            let strays = Set(rows.map(\.id)).symmetricDifference((0..<2_203).filter { $0 != 2_100 }.map { "g\($0)" })
            #expect(strays.isEmpty)
            #expect(rows.allSatisfy { $0.title == "Item \($0.id.dropFirst())" && $0.link == "https://e.com/\($0.id.dropFirst())" })

            // When two items change, one of them in the last chunk of a batch, and the repeat changes too
            #expect(try await merge(document(retitled: [10, 1_999, 2_100])) == FeedMerge(inserted: 0, updated: 2, unchanged: 2_200))
            #expect(try await store.item(id: "g1999", feed: "f")?.title == "Item 1999, again")
            #expect(try await store.item(id: "g7", feed: "f")?.title == "Item 7")
        }
    }

    // MARK: - Identity

    @Test func itemsWithoutLinksAreKeptAndKeepTheirReadMarks() async throws {
        let status = FetchForumFeed(url: URL(string: "https://status.example.com/feed.xml")!)
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            // Given a feed of items without links, merged, two of them read
            let first = try await StoreFixtures.perform(status, respondingWith: try fixture("rss2-without-links.xml"), in: store).written
            #expect(first == FeedMerge(inserted: 6, updated: 0, unchanged: 0))
            let items = try await store.read { db in try FeedItem.newestFirst(feed: status.url).fetchAll(db) }
            #expect(items.allSatisfy { $0.link == nil })
            let guidOnly = try #require(items.first { $0.id == "incident-2041" })
            let titleOnly = try #require(items.first { $0.id.hasPrefix(FeedIdentity.prefix) && $0.published == utc("2026-02-27T12:00:00Z") })
            #expect(try await store.markRead(guidOnly))
            #expect(try await store.markRead(titleOnly))

            // When the feed comes again
            let second = try await StoreFixtures.perform(status, respondingWith: try fixture("rss2-without-links.xml"), in: store).written

            // Then every item is the same row, and the read marks stay
            #expect(second == FeedMerge(inserted: 0, updated: 0, unchanged: 6))
            let again = try await store.read { db in try FeedItem.newestFirst(feed: status.url).fetchAll(db) }
            #expect(again.filter(\.isRead).map(\.id).sorted() == [guidOnly.id, titleOnly.id].sorted())

            // And marking unread works; an item gone from the cache says so
            #expect(try await store.markRead(guidOnly, read: false))
            #expect(try await store.item(id: guidOnly.id, feed: guidOnly.feed)?.isRead == false)
            var gone = guidOnly
            gone.id = "no-such-item"
            #expect(try await store.markRead(gone) == false)
        }
    }

    @Test func twoFeedsMayUseTheSameGuids() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            // Given two forums whose posts are both "post-1"
            let (one, two) = ("https://one.example.com/rss", "https://two.example.com/rss")
            for (feed, title) in [(one, "In one"), (two, "In two")] {
                let written = try await store.write { db in
                    try FeedItem.merge([ParsedItem(id: "post-1", link: feed + "/1", title: title)], feed: feed, into: db)
                }
                #expect(written == FeedMerge(inserted: 1, updated: 0, unchanged: 0))
            }

            // Then each feed has its own row, read apart
            let oneItems = try await store.read { db in try FeedItem.newestFirst(feed: one).fetchAll(db) }
            let twoItems = try await store.read { db in try FeedItem.newestFirst(feed: two).fetchAll(db) }
            #expect(oneItems.map(\.title) == ["In one"])
            #expect(twoItems.map(\.title) == ["In two"])
            try await store.markRead(try #require(oneItems.first))
            #expect(try await store.item(id: "post-1", feed: one)?.isRead == true)
            #expect(try await store.item(id: "post-1", feed: two)?.isRead == false)
        }
    }

    @Test func anItemKnownByItsGuidFollowsANewLinkAndKeepsAKnownOne() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            func merge(_ link: String?) async throws -> FeedMerge {
                try await store.write { db in try FeedItem.merge([ParsedItem(id: "g", link: link, title: "T")], feed: "f", into: db) }
            }
            // Given an item read under its first link
            _ = try await merge("https://e.com/old")
            try await store.markRead("https://e.com/old")

            // When its link changes, the same row follows it, still read
            #expect(try await merge("https://e.com/new") == FeedMerge(inserted: 0, updated: 1, unchanged: 0))
            #expect(try await store.item(id: "g", feed: "f")?.link == "https://e.com/new")
            #expect(try await store.item(id: "g", feed: "f")?.isRead == true)

            // When the feed stops giving a link, the known one stays
            #expect(try await merge(nil) == FeedMerge(inserted: 0, updated: 0, unchanged: 1))
            #expect(try await store.item(id: "g", feed: "f")?.link == "https://e.com/new")
        }
    }

    @Test func markingByLinkMarksItInEveryFeed() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            try await store.write { db in
                _ = try FeedItem.merge([ParsedItem(id: "a", link: "https://e.com/shared", title: "A")], feed: "one", into: db)
                _ = try FeedItem.merge([ParsedItem(id: "b", link: "https://e.com/shared", title: "B")], feed: "two", into: db)
            }
            #expect(try await markRead("https://e.com/shared", in: store))
            #expect(try await store.allItems().allSatisfy(\.isRead))
        }
    }

    // MARK: - Top songs

    /// The chart as the cache holds it: one value, top first.
    func chart(in store: Store) async throws -> [Song]? {
        try await store.read { db in try FetchTopSongs().cachedValue(in: db) }
    }

    @Test func topSongsReplaceTheChart() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            let written = try await StoreFixtures.perform(FetchTopSongs(), respondingWith: try fixture("topsongs.json"), in: store)
            #expect(written.written != nil)
            let songs = try await chart(in: store)
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
            let after = try #require(try await chart(in: store))
            #expect(after.map(\.id) == ["https://music.example.com/song/1002", "https://music.example.com/song/1001"])
            #expect(after.map(\.rank) == [1, 2])
        }
    }

    @Test func aChartOfOneIsAnObjectNotAnArray() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            _ = try await StoreFixtures.perform(FetchTopSongs(limit: 1), respondingWith: try fixture("topsongs-one.json"), in: store)
            #expect(try await chart(in: store)?.map(\.title) == ["Offline Again - Hummingbirds"])
        }
    }

    /// A list tells its rows by id: a song the chart lists twice is one row,
    /// at its higher rank (as the table's primary key kept it before).
    @Test func aSongListedTwiceKeepsItsHigherRank() async throws {
        let entry = { (id: Int) in #"{"id": {"label": "https://music.example.com/song/\#(id)"}, "title": {"label": "Song \#(id)"}, "link": []}"# }
        let folder = FileManager.default.temporaryDirectory.appending(path: "nerdfeed-chart-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appending(path: "twice.json")
        try Data(#"{"feed": {"entry": [\#(entry(1)), \#(entry(2)), \#(entry(1)), \#(entry(3))]}}"#.utf8).write(to: file)
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            _ = try await StoreFixtures.perform(FetchTopSongs(), respondingWith: file, in: store)
            let songs = try #require(try await chart(in: store))
            #expect(songs.map(\.title) == ["Song 1", "Song 2", "Song 3"])
            #expect(songs.map(\.rank) == [1, 2, 4])
        }
    }

    @Test func aBrokenChartKeepsTheOldOne() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            _ = try await StoreFixtures.perform(FetchTopSongs(), respondingWith: try fixture("topsongs.json"), in: store)
            let error = await #expect(throws: DepotError.self) {
                try await StoreFixtures.perform(FetchTopSongs(), respondingWith: try fixture("rss2.xml"), in: store)
            }
            #expect(error?.code == .decoding)
            #expect(try await chart(in: store)?.count == 3)
        }
    }
}
