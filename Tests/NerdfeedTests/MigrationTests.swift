import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import NerdfeedKit

/// A cache made by version 1 (items keyed by link) opened by this version:
/// nothing is lost, and each read mark stays with its item once the feed
/// brings the item's new identity.
@Suite struct MigrationTests {
    static let atomURL = URL(string: "https://elsewhere.example.com/feeds/atom")!

    /// A row as version 1 wrote it.
    struct V1Row {
        var id: String
        var title: String
        var author: String?
        var summary: String?
        var published: Date?
        var feed: String
        var isRead: Bool
    }

    /// Makes a cache file with version 1's schema, by version 1's own migration,
    /// holding `rows`; returns its path in a new folder.
    static func v1Cache(_ rows: [V1Row]) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appending(path: "nerdfeed-v1-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appending(path: "cache.sqlite")
        let queue = try DatabaseQueue(path: file.path)
        try NerdfeedSchema.migrator.migrate(queue, upTo: "nerdfeed-v1")
        try queue.write { db in
            for row in rows {
                try db.execute(
                    sql: "INSERT INTO feedItem (id, title, author, summary, published, feed, isRead) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    arguments: [row.id, row.title, row.author, row.summary, row.published, row.feed, row.isRead])
            }
        }
        try queue.close()
        return file
    }

    /// What version 1 kept of a fixture: each item with a link, under its link.
    static func v1Rows(_ fixtureName: String, feed: URL, read: Set<String>) throws -> [V1Row] {
        try FeedParser.parse(try fixtureData(fixtureName), baseURL: feed).items.compactMap { item in
            item.link.map { V1Row(id: $0, title: item.title, author: item.author, summary: item.summary, published: item.published,
                                  feed: feed.absoluteString, isRead: read.contains($0)) }
        }
    }

    @Test func readMarksSurviveTheMoveToGuidsAndAtomIDs() async throws {
        // Given a version 1 cache of the forum's RSS and a blog's Atom feed, some items read,
        // and a read post that has since left the feed
        let rss = try Self.v1Rows("rss2.xml", feed: forumFeedURL, read: [
            "https://forums.example.com/viewtopic.php?t=101&p=1",  // guid post-101 now
            "https://forums.example.com/feeds/posts/103",  // no guid: still its link
            "https://forums.example.com/forum/posts/104",  // a permalink guid: the same string
        ])
        let blog = try Self.v1Rows("atom10.xml", feed: Self.atomURL, read: [
            "https://blog.example.com/2005/07/atom-and-you",  // tag:blog.example.com,2005:1 now
            "https://blog.example.com/x.html",  // tag:blog.example.com,2005:4 now
        ])
        let gone = V1Row(id: "https://forums.example.com/forum/posts/50", title: "Long gone", feed: forumFeedURL.absoluteString, isRead: true)
        #expect(rss.count == 5 && blog.count == 3, "version 1 kept the items with a link")
        let file = try Self.v1Cache(rss + blog + [gone])
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }

        try await StoreFixtures.withStore(copying: file, migrator: NerdfeedSchema.migrator) { store in
            // When the store opens, the migration keeps every row under its link, awaiting its identity
            let migrated = try await store.allItems()
            #expect(migrated.count == 9)
            #expect(migrated.allSatisfy { $0.id == $0.link })
            #expect(migrated.filter(\.isRead).count == 6)
            #expect(try await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM feedItem WHERE awaitsIdentity") } == 9)

            // When both feeds sync
            let rssMerge = try await StoreFixtures.perform(FetchForumFeed(url: forumFeedURL), respondingWith: try fixture("rss2.xml"), in: store).written
            let atomMerge = try await StoreFixtures.perform(FetchForumFeed(url: Self.atomURL), respondingWith: try fixture("atom10.xml"), in: store).written

            // Then the rows moved to their new identities are the same items: only the new ones count
            #expect(rssMerge == FeedMerge(inserted: 1, updated: 0, unchanged: 5))
            #expect(atomMerge == FeedMerge(inserted: 1, updated: 0, unchanged: 3))
            let forum = forumFeedURL.absoluteString
            let atom = Self.atomURL.absoluteString
            #expect(try await store.item(id: "post-101", feed: forum)?.isRead == true)
            #expect(try await store.item(id: "post-101", feed: forum)?.link == "https://forums.example.com/viewtopic.php?t=101&p=1")
            #expect(try await store.item(id: "https://forums.example.com/feeds/posts/103", feed: forum)?.isRead == true)
            #expect(try await store.item(id: "https://forums.example.com/forum/posts/104", feed: forum)?.isRead == true)
            #expect(try await store.item(id: "https://forums.example.com/forum/posts/102", feed: forum)?.isRead == false)
            #expect(try await store.item(id: "post-105", feed: forum)?.isRead == false)  // new: it had no link
            #expect(try await store.item(id: "tag:blog.example.com,2005:1", feed: atom)?.isRead == true)
            #expect(try await store.item(id: "tag:blog.example.com,2005:2", feed: atom)?.isRead == false)
            #expect(try await store.item(id: "tag:blog.example.com,2005:3", feed: atom)?.isRead == false)  // new: it had no link
            #expect(try await store.item(id: "tag:blog.example.com,2005:4", feed: atom)?.isRead == true)
            // And nothing is left under an old link but the post that left the feed, still read and awaiting
            let after = try await store.allItems()
            #expect(after.count == 11)
            #expect(try await store.item(id: "https://forums.example.com/viewtopic.php?t=101&p=1", feed: forum) == nil)
            #expect(try await store.item(id: gone.id, feed: forum)?.isRead == true)
            let awaiting = try await store.read { db in try String.fetchAll(db, sql: "SELECT id FROM feedItem WHERE awaitsIdentity") }
            #expect(awaiting == [gone.id])

            // When the feeds sync again, nothing changes
            let again = try await StoreFixtures.perform(FetchForumFeed(url: forumFeedURL), respondingWith: try fixture("rss2.xml"), in: store).written
            #expect(again == FeedMerge(inserted: 0, updated: 0, unchanged: 6))
            #expect(try await store.allItems() == after)
        }
    }

    @Test func aRowThatCannotTakeItsIdentityStaysAsItWas() async throws {
        // Given a version 1 row for post 101, read
        let link = "https://forums.example.com/viewtopic.php?t=101&p=1"
        let file = try Self.v1Cache([V1Row(id: link, title: "Old", feed: forumFeedURL.absoluteString, isRead: true)])
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        try await StoreFixtures.withStore(copying: file, migrator: NerdfeedSchema.migrator) { store in
            // and, after the migration, a row that already holds its new identity
            let forum = forumFeedURL.absoluteString
            _ = try await store.write { db in
                try FeedItem.merge([ParsedItem(id: "post-101", link: "https://forums.example.com/other", title: "Other")], feed: forum, into: db)
            }

            // When the feed brings post-101 with the old row's link
            _ = try await StoreFixtures.perform(FetchForumFeed(url: forumFeedURL), respondingWith: try fixture("rss2.xml"), in: store)

            // Then the row with the identity wins, and the old one is left as it was, read
            #expect(try await store.item(id: "post-101", feed: forum)?.link == link)
            #expect(try await store.item(id: link, feed: forum)?.isRead == true)
            #expect(try await store.item(id: link, feed: forum)?.title == "Old")
        }
    }

    /// The chart moved to a cached value: the `song` table of a version 2
    /// cache goes, and the feed's items stay.
    @Test func theSongTableGoesAndTheItemsStay() async throws {
        let file = try Self.v1Cache([V1Row(id: "https://forums.example.com/forum/posts/104", title: "Kept", feed: forumFeedURL.absoluteString, isRead: true)])
        defer { try? FileManager.default.removeItem(at: file.deletingLastPathComponent()) }
        let queue = try DatabaseQueue(path: file.path)
        try NerdfeedSchema.migrator.migrate(queue, upTo: "nerdfeed-v2-identity")
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO song (id, rank, title, artist, link) VALUES ('s', 1, 'Fetch Twice', 'Hummingbirds', 'l')")
        }
        try queue.close()

        try await StoreFixtures.withStore(copying: file, migrator: NerdfeedSchema.migrator) { store in
            let items = try await store.allItems()
            #expect(items.map(\.title) == ["Kept"])
            #expect(items.map(\.isRead) == [true])
            #expect(try await store.read { db in try db.tableExists("song") } == false)
        }
    }

    @Test func aNewCacheHasTheNewSchema() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            let columns = try await store.read { db in try db.columns(in: FeedItem.databaseTableName).map { ($0.name, $0.isNotNull) } }
            #expect(columns.first { $0.0 == "link" }?.1 == false, "link is nullable")
            let primaryKey = try await store.read { db in try db.primaryKey(FeedItem.databaseTableName).columns }
            #expect(primaryKey == ["feed", "id"])
            let indexes = try await store.read { db in
                try db.indexes(on: FeedItem.databaseTableName).map(\.name).filter { !$0.hasPrefix("sqlite_") }.sorted()
            }
            #expect(indexes == ["feedItem_awaitingIdentity", "feedItem_byFeedNewest"])
            #expect(try await store.read { db in try db.tableExists("song") } == false, "the chart is a cached value")
            // An item without a link can be stored and read back.
            let item = FeedItem(id: "hash:fnv1a64:0000000000000001", link: nil, title: "No link", feed: "f")
            try await store.write { db in try item.insert(db) }
            #expect(try await store.item(id: item.id, feed: "f") == item)
        }
    }
}
