import Depot
import DepotStore
import Foundation
import GRDB
import NerdfeedKit
import Testing

/// Nerdfeed's cache keeps the newest items of each feed and every read one.
@Suite struct NerdfeedRetentionTests {
    /// `count` items of `feed`, item i published i minutes before `now`.
    static func items(_ count: Int, feed: String = "https://forums.example.com/rss", now: Date) -> [FeedItem] {
        (0..<count).map { i in
            FeedItem(id: "post-\(i)", link: "https://forums.example.com/posts/\(i)", title: "Post \(i)", published: now.addingTimeInterval(-Double(i) * 60), feed: feed)
        }
    }

    static func withStore<T>(keep: Int? = nil, _ body: (Store) async throws -> T) async throws -> T {
        let folder = FileManager.default.temporaryDirectory.appending(path: "nerdfeed-retention-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let retention = keep.map { NerdfeedSchema.retention(keep: $0) } ?? NerdfeedSchema.retention()
        let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: NerdfeedSchema.migrator, retention: retention)
        _ = try await store.evict()   // after the one at open, before the test writes
        return try await body(store)
    }

    @Test func byDefaultTheNewestThousandItemsAndEveryReadOneStay() async throws {
        try await Self.withStore { store in
            // Given 1,200 items of the forum, three old ones read, and 5 items of another feed
            let now = Date()
            var items = Self.items(1_200, now: now)
            for index in [1_050, 1_100, 1_199] { items[index].isRead = true }
            let other = Self.items(5, feed: "https://other.example.com/rss", now: now)
            let rows = items + other
            try await store.write { db in
                for item in rows { try item.insert(db) }
            }

            let report = try await store.evict()

            // Then the newest 1,000 stay with the three read ones, and the other feed is untouched
            #expect(report.rowsEvicted == ["feedItem": 197])
            let kept = try await store.read { db in
                try String.fetchAll(db, sql: "SELECT id FROM feedItem WHERE feed = 'https://forums.example.com/rss'")
            }
            #expect(Set(kept) == Set((0..<1_000).map { "post-\($0)" } + ["post-1050", "post-1100", "post-1199"]))
            let others = try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM feedItem WHERE feed = 'https://other.example.com/rss'") }
            #expect(others == 5)
        }
    }

    @Test func keepSetsHowManyItemsStay() async throws {
        try await Self.withStore(keep: 3) { store in
            var items = Self.items(10, now: Date())
            items[9].isRead = true
            let rows = items
            try await store.write { db in
                for item in rows { try item.insert(db) }
            }
            _ = try await store.evict()
            let kept = try await store.read { db in try String.fetchAll(db, sql: "SELECT id FROM feedItem ORDER BY published DESC") }
            #expect(kept == ["post-0", "post-1", "post-2", "post-9"])
        }
    }
}
