import Foundation
import GRDB

extension SyncLedger {
    /// The ledger's columns for what the last response said about its
    /// freshness (seconds since 1970, or NULL), added to older ledgers.
    static let freshnessColumns = ["fresh_until", "swr_until"]

    /// Whether the ledger table has the freshness columns.
    static func hasFreshnessColumns(_ db: Database) throws -> Bool {
        let columns = Set(try db.columns(in: tableName).map(\.name))
        return freshnessColumns.allSatisfy(columns.contains)
    }

    /// Adds the freshness columns an older ledger lacks. Their NULL means
    /// "the server said nothing": such an entry is stale for
    /// ``CachePolicy/cacheFirst`` until its next sync.
    static func addFreshnessColumns(_ db: Database) throws {
        let columns = Set(try db.columns(in: tableName).map(\.name))
        for column in freshnessColumns where !columns.contains(column) {
            try db.execute(sql: "ALTER TABLE \(tableName) ADD COLUMN \(column) DOUBLE")
        }
    }

    /// Records what a response (or a 304) that just synced `key` said about
    /// its freshness, after ``recordSuccess(for:at:validators:url:in:)``.
    /// After `no-store`, no validators are kept: for `url`, or in the entry.
    static func recordFreshness(_ freshness: Freshness, for key: String, url: String?, in db: Database) throws {
        try db.execute(
            sql: "UPDATE \(tableName) SET fresh_until = ?, swr_until = ? WHERE key = ?",
            arguments: [freshness.freshUntil?.timeIntervalSince1970, freshness.staleWhileRevalidateUntil?.timeIntervalSince1970, key])
        guard !freshness.keepsValidators else { return }
        try db.execute(sql: "UPDATE \(tableName) SET etag = NULL, last_modified = NULL WHERE key = ?", arguments: [key])
        if let url {
            try db.execute(sql: "DELETE FROM \(validatorsTable) WHERE url = ?", arguments: [url])
        }
    }
}
