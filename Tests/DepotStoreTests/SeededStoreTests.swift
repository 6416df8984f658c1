import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// The design sources' way to test an operation end to end: start from a known
/// SQLite file, feed the operation a file, assert the rows that result.
@Suite struct SeededStoreTests {
    /// Merges a page of items into the table by primary key, the way a feed
    /// reader merges new items by link.
    struct MergeItems: CachingOperation {
        var request: NetworkRequest { .get("items", query: ["page": "2"]) }
        var cacheKey: String { "merge-items" }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Item] {
            try response.decode([Item].self)
        }

        func write(_ items: [Item], to db: Database) throws -> Int {
            for item in items { try item.upsert(db) }
            return items.count
        }
    }

    @Test func mergingAPageIntoTheSeedGivesTheExpectedRows() async throws {
        let seed = try #require(Bundle.module.url(forResource: "seed", withExtension: "sqlite", subdirectory: "Fixtures"))
        let page = try #require(Bundle.module.url(forResource: "items-page", withExtension: "json", subdirectory: "Fixtures"))
        let date = ManualDate()

        try await StoreFixtures.withStore(copying: seed, migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            // Given the seed: items 0...4 titled "seeded", synced with ETag "seed-v1"
            #expect(try await store.read { db in try Item.fetchCount(db) } == 5)

            // When the operation merges page 2 (items 3...7) from a file
            let update = try await StoreFixtures.perform(MergeItems(), respondingWith: page, headers: ["ETag": "\"v2\""], in: store)

            // Then 0...2 are untouched, 3...4 are replaced, 5...7 are new
            #expect(update == .updated(5))
            let titles = try await store.read { db in try Item.order(Column("id")).fetchAll(db).map(\.title) }
            #expect(titles == ["seeded 0", "seeded 1", "seeded 2", "page 3", "page 4", "page 5", "page 6", "page 7"])
            let entry = try await store.ledger.entry(for: "merge-items")
            #expect(entry?.etag == "\"v2\"")
            #expect(entry?.lastSynced == date.now)
        }
        // And the committed seed is unchanged
        var readOnly = Configuration()
        readOnly.readonly = true
        let original = try DatabaseQueue(path: seed.path, configuration: readOnly)
        let seedCount = try await original.read { db in try Item.fetchCount(db) }
        #expect(seedCount == 5)
    }
}
