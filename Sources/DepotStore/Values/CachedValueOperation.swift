import Depot
import Foundation
import GRDB

/// An operation whose answer is cached as one `Codable` value, under its
/// ``CachingOperation/cacheKey``, with no table or migration of your own.
///
/// Most screens need "this endpoint's answer, cached, live, and refreshed
/// by policy". Conform, say what the value is, and Depot keeps it in a
/// table of its own (`depot_values`: the encoded value, its type and
/// version), written in ONE transaction with its ledger entry, as every
/// cached write is. Everything a ``CachingOperation`` gets works on it:
/// conditional requests, freshness, invalidation by key, prefix and tag,
/// pending mutations re-applied after each sync.
///
/// ```swift
/// struct FetchTopSongs: CachedValueOperation {
///     var request: NetworkRequest { .get("topsongs/limit=25/json") }
///
///     func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Song] {
///         try response.decode(Chart.self).feed.results
///     }
/// }
///
/// let songs = try controller.value(for: FetchTopSongs(), policy: .cacheFirst(maxAge: .seconds(300)))
/// songs.value        // [Song]? — nil before the first sync
/// songs.syncStatus   // isSyncing, lastSynced, lastError
/// ```
///
/// Without `parse`, the JSON body is decoded as the value: say which type it is.
///
/// ```swift
/// struct FetchProfile: CachedValueOperation {
///     typealias Value = Profile
///     var request: NetworkRequest { .get("profile") }
/// }
/// ```
///
/// Move to tables (a GRDB record, a migration, ``CachingOperation``) when you
/// need SQL: sections, sorting or filtering in the database, eviction by
/// column, thousands of rows that change one at a time. A value is read
/// and written whole.
///
/// **Changing `Value`.** A stored value that no longer decodes (its type
/// changed between app versions) is a miss: ``LiveValue`` shows `nil`, keeps
/// the `DepotError` in ``LiveValue/error``, and the resource is refetched, as
/// if it had never been synced: without validators, so that a 304 cannot
/// confirm the old shape. Raise ``valueVersion`` for a change that still
/// decodes but means something else.
public protocol CachedValueOperation: CachingOperation where Payload == Value, Written == Void {
    /// The value cached: what `parse` returns.
    associatedtype Value: Codable & Sendable

    /// The version of `Value`'s meaning. A stored value of another version
    /// is a miss. Default: 1.
    static var valueVersion: Int { get }

    /// Turns the response into the value. Runs outside the database
    /// transaction. Default, when `Value` is `Decodable`: the JSON body.
    ///
    /// (``CachingOperation`` asks for it already; said again here so that
    /// `Value` is inferred from `parse` in any file that uses the operation.)
    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> Value
}

extension CachedValueOperation {
    public static var valueVersion: Int { 1 }

    /// Stores `value` under ``CachingOperation/cacheKey``, as the server's.
    public func write(_ value: Value, to db: Database) throws {
        try writeCachedValue(value, to: db)
    }

    /// Adds the validators of the last full response from this URL, as a
    /// ``CachingOperation`` does, but only while a value that decodes is
    /// cached under the key: a 304 confirms what the cache holds, so a value
    /// that is missing (evicted, or a key the table path synced) or no longer
    /// decodes is fetched whole.
    public func prepare(_ request: inout TransportRequest, context: OperationContext) async throws {
        try await addValidators(to: &request, context: context, holdsData: { db in try self.cachedValue(in: db) != nil })
    }

    /// The cached value, or `nil` if there is none, or it no longer decodes
    /// as `Value` (or is of another ``valueVersion``). Use it in a
    /// ``Mutation``, a ``ChangeFeed``, or any read.
    public func cachedValue(in db: Database) throws -> Value? {
        guard let row = try Row.fetchOne(db, sql: "SELECT type, version, value FROM \(ValueTable.name) WHERE key = ?", arguments: [cacheKey]) else { return nil }
        return try? ValueTable.decode(Value.self, version: Self.valueVersion, row: row).get()
    }

    /// Stores `value` as the server's (what a sync does): in a
    /// ``Mutation/commit(_:_:)`` with the server's answer, or in a
    /// ``ChangeFeed``'s change. Live values show it at the commit.
    public func writeCachedValue(_ value: Value, to db: Database) throws {
        try ValueTable.write(ValueTable.encode(value), type: ValueTable.typeName(Value.self), version: Self.valueVersion, key: cacheKey, in: db)
    }

    /// Changes the cached value optimistically, in a
    /// ``Mutation/applyOptimistically(_:)``: the server's value is kept
    /// beside it, so that ``revertCachedValue(in:)`` can go back to it. After
    /// each sync, pending mutations apply their change again on top of the
    /// server's new value. Does nothing if no value is cached (or it no
    /// longer decodes).
    public func modifyCachedValue(in db: Database, _ change: (inout Value) throws -> Void) throws {
        guard var value = try cachedValue(in: db) else { return }
        try change(&value)
        try ValueTable.modify(ValueTable.encode(value), key: cacheKey, in: db)
    }

    /// Goes back to the server's value, without the optimistic changes made
    /// since the last sync, in a ``Mutation/rollback(_:_:)``; and marks the
    /// key stale, so that live values refetch it once and the mutations
    /// still pending apply again on top of the server's answer.
    public func revertCachedValue(in db: Database) throws {
        try ValueTable.revert(key: cacheKey, in: db)
        _ = try SyncLedger.invalidate([.key(cacheKey)], in: db)
    }
}
