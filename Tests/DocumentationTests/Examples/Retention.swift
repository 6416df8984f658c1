import Depot
import DepotStore
import Foundation
import GRDB

// The retention API's doc comments (Sources/DepotStore/Retention/) and the
// retention section proposed for the "Keeping the cache in shape" article.

enum RetentionExamples {
    struct PostPayload: Codable, Sendable { var localID: String }

    static func policy() -> RetentionPolicy {
        let items = RetentionPolicy(
            table: "feedItem",
            keeping: [
                .maxCount(1_000, newestBy: "published", per: "feed"),
                .maxAge(.seconds(30 * 86_400), by: "published"),
            ],
            protecting: "isRead = 1 OR starred = 1")
        return items
    }

    static func open(path: String, migrator: DatabaseMigrator) throws -> Store {
        let retention = Retention(
            policies: [RetentionPolicy(table: "feedItem",
                                       keeping: [.maxCount(1_000, newestBy: "published")],
                                       protecting: "isRead = 1")],
            sizeBudget: 50_000_000)
        let store = try Store(path: path, migrator: migrator, retention: retention)
        return store
    }

    static func onDemand(store: Store) async throws {
        let report = try await store.evict()
        print(report.rowsEvicted["feedItem", default: 0], "items in", report.batches, "batches")
    }

    static func rules() -> [RetentionRule] {
        [
            .maxAge(.seconds(7 * 86_400), by: "fetchedAt"),
            .maxCount(1_000, newestBy: "published", per: "feed"),
            .whileReferenced(by: .syncKey(in: "feed"), .results),
        ]
    }

    static func retained(payload: PostPayload) -> [RetainedRow] {
        [RetainedRow(table: "post", key: payload.localID)]
    }

    /// The article's example: the feed's rows while the app syncs the feed
    /// or shows them, at most 500 of each feed, never a starred one, in a
    /// 20 MB file.
    static func articleExample(path: String, migrator: DatabaseMigrator) async throws {
        let retention = Retention(
            policies: [
                RetentionPolicy(
                    table: "article",
                    keeping: [
                        .maxCount(500, newestBy: "publishedAt", per: "feed"),
                        .whileReferenced(by: .syncKey(in: "feed"), .results),
                    ],
                    protecting: "starred = 1"),
            ],
            sizeBudget: 20_000_000)
        let store = try Store(path: path, migrator: migrator, retention: retention)
        // Runs at open and after syncs on its own; now, too:
        let report = try await store.evict()
        print(report)   // "evicted 120 rows (article 120) in 1 batch"
    }
}
