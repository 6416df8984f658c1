import Depot
import Foundation
import GRDB

/// The table of ``CachedValueOperation``s' values, one row per cache key:
/// the value (in ``ValueFormat``), its type and version, the server's value while an
/// optimistic change is applied, and when it was written.
enum ValueTable {
    static let name = "depot_values"

    static func create(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(name) (
                key TEXT PRIMARY KEY NOT NULL,
                type TEXT NOT NULL,
                version INTEGER NOT NULL,
                value BLOB NOT NULL,
                server BLOB,
                updatedAt DOUBLE NOT NULL -- seconds since 1970, as retention reads a number
            )
            """)
        // A value removed (evicted, deleted) is stale: a live value's status
        // refetches it, whatever the policy's age says.
        try db.execute(sql: """
            CREATE TRIGGER IF NOT EXISTS \(name)_removed AFTER DELETE ON \(name) BEGIN
                UPDATE \(SyncLedger.tableName) SET stale = 1, invalidations = invalidations + 1 WHERE key = OLD.key;
            END
            """)
    }

    /// The name a value's type is stored under: its module-qualified name,
    /// as `String(reflecting:)` writes it (`Swift.Array<App.Song>`).
    ///
    /// `_typeName` is what `String(reflecting:)` prints for a type, without
    /// first casting the metatype to `CustomDebugStringConvertible` and the
    /// like: each cast searches every protocol conformance in the process
    /// the first time, about 0.4 ms of a cold start (`depot-bench values`).
    static func typeName<Value>(_ type: Value.Type) -> String {
        _typeName(type, qualified: true)
    }

    static func encode<Value: Encodable>(_ value: Value) throws -> Data {
        do {
            return try ValueFormat.encode(value)
        } catch {
            throw DepotError(.encoding, detail: "cannot encode the cached value of type \(typeName(Value.self))", underlying: error)
        }
    }

    /// The value in `row` (its `type`, `version` and `value` columns), or why it is a miss.
    static func decode<Value: Decodable>(_ type: Value.Type, version: Int, row: Row) -> Result<Value, DepotError> {
        let storedType: String = row["type"]
        let storedVersion: Int = row["version"]
        guard storedType == typeName(Value.self), storedVersion == version else {
            return .failure(DepotError(
                .decoding,
                detail: "the cached value is a \(storedType) of version \(storedVersion), not a \(typeName(Value.self)) of version \(version)"))
        }
        let data: Data = row["value"]
        do {
            return .success(try ValueFormat.decode(Value.self, from: data))
        } catch {
            return .failure(DepotError(.decoding, detail: "the cached value no longer decodes as \(typeName(Value.self))", underlying: error))
        }
    }

    /// Stores the server's value: no optimistic change on top of it.
    static func write(_ data: Data, type: String, version: Int, key: String, in db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO \(name) (key, type, version, value, server, updatedAt) VALUES (?, ?, ?, ?, NULL, ?)
                ON CONFLICT (key) DO UPDATE SET type = excluded.type, version = excluded.version,
                    value = excluded.value, server = NULL, updatedAt = excluded.updatedAt
                """,
            arguments: [key, type, version, data, Date().timeIntervalSince1970])
    }

    /// Dates the value of `key` (if there is one) with the store's wall date:
    /// a sync's write does, for retention's `maxAge`.
    static func stamp(key: String, at date: Date, in db: Database) throws {
        try db.execute(sql: "UPDATE \(name) SET updatedAt = ? WHERE key = ?", arguments: [date.timeIntervalSince1970, key])
    }

    /// Replaces the value with an optimistic one, keeping the server's the first time.
    static func modify(_ data: Data, key: String, in db: Database) throws {
        try db.execute(
            sql: "UPDATE \(name) SET server = coalesce(server, value), value = ? WHERE key = ?",
            arguments: [data, key])
    }

    /// Back to the server's value.
    static func revert(key: String, in db: Database) throws {
        try db.execute(sql: "UPDATE \(name) SET value = server, server = NULL WHERE key = ? AND server IS NOT NULL", arguments: [key])
    }
}

/// One row of ``ValueTable`` as live values read it: decoded where it is
/// read (off the main actor), a miss when it no longer decodes.
struct StoredValue<Value: Codable & Sendable>: FetchableRecord, Identifiable, Equatable, Sendable {
    /// The cache key.
    let id: String
    /// The encoded value, compared to tell a change.
    let bytes: Data
    /// The value, or why it is a miss.
    let value: Result<Value, DepotError>

    init(row: Row) {
        id = row["key"]
        bytes = row["value"]
        let version: Int = row["expectedVersion"]
        value = ValueTable.decode(Value.self, version: version, row: row)
    }

    static func == (lhs: StoredValue, rhs: StoredValue) -> Bool {
        lhs.id == rhs.id && lhs.bytes == rhs.bytes
    }

    /// The row of `key`, with the version `Value` expects.
    static func request(key: String, version: Int) -> SQLRequest<StoredValue> {
        SQLRequest(
            sql: "SELECT key, type, version, value, ? AS expectedVersion FROM \(ValueTable.name) WHERE key = ?",
            arguments: [version, key])
    }
}

extension RetentionPolicy {
    /// A policy for the values ``CachedValueOperation``s cache (their table,
    /// `depot_values`). A value's date is its last write, in the column
    /// `updatedAt`; a removed value's key is marked stale, so a live value
    /// refetches it. Under a size budget, give the ``Retention`` a small
    /// `batchSize`: values are few and large, and a batch goes whole.
    ///
    /// ```swift
    /// let retention = Retention(policies: [
    ///     .cachedValues(keeping: [.maxAge(.seconds(7 * 86_400), by: "updatedAt")]),
    /// ])
    /// ```
    public static func cachedValues(keeping rules: [RetentionRule]) -> RetentionPolicy {
        RetentionPolicy(table: ValueTable.name, keeping: rules)
    }
}
