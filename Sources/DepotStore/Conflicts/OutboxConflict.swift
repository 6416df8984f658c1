import Depot
import Foundation
import GRDB

/// A conflict kept for the user: an outbox entry whose edit met another
/// writer's change to the same fields (or a record deleted on the server),
/// with both sides. It holds back only its own lane, survives relaunch, and
/// is listed by ``Outbox/conflicts()`` and ``OutboxSnapshot/conflicts``.
public struct OutboxConflict: Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// The outbox entry in conflict.
    public var id: OutboxEntry.ID
    /// The edit's type (``Mutation/typeName``).
    public var typeName: String
    /// The record edited.
    public var record: RecordKey?
    /// The fields changed on both sides to different values; when the
    /// conflict was kept for another reason (a record deleted on the server,
    /// an edit whose ``VersionedEdit/resolve(_:)`` keeps it, too many
    /// rebases), every field the edit changed (``FieldMerge/changes(base:mine:theirs:)``).
    public var fields: [FieldConflict]
    /// The server's version when the conflict was found; `nil` if the record
    /// was deleted there.
    public var theirVersion: RecordVersion?
    /// When the conflict was found.
    public var createdAt: Date
    /// The three sides, as JSON: what ``sides(as:)`` decodes.
    let base: Data, mine: Data, theirs: Data?

    /// Whether the record was deleted on the server.
    public var isDeletedOnServer: Bool { theirVersion == nil }

    /// The three sides as the edit's ``VersionedEdit/Fields``: what it was
    /// based on, what it wanted, and what the server has (`nil`: deleted).
    public func sides<Fields: Decodable>(as type: Fields.Type) throws(DepotError) -> (base: Fields, mine: Fields, theirs: Fields?) {
        do {
            let decoder = JSONDecoder()
            return (try decoder.decode(Fields.self, from: base), try decoder.decode(Fields.self, from: mine), try theirs.map { try decoder.decode(Fields.self, from: $0) })
        } catch {
            throw DepotError(.decoding, operation: typeName, detail: "conflict \(id) does not decode as \(Fields.self)", underlying: error)
        }
    }

    /// What keeping mine sends (``Outbox/resolveConflict(_:keeping:)``): the
    /// server's record with every field this edit changed set to its value.
    /// Start from it to resolve with an edited value. For a record deleted on
    /// the server, the edit's own fields.
    public func keepingMine<Fields: Codable & Sendable>(as type: Fields.Type) throws(DepotError) -> Fields {
        let (base, mine, theirs) = try sides(as: Fields.self)
        guard let theirs else { return mine }
        return try FieldMerge.keepingMine(base: base, mine: mine, theirs: theirs)
    }

    /// `#3 contact #7: email: a@x → b@x | c@x`.
    public var description: String {
        let what = record.map { " \($0)" } ?? ""
        if isDeletedOnServer { return "\(id)\(what): deleted on the server" }
        return "\(id)\(what): " + fields.map(\.description).joined(separator: "; ")
    }
}

/// Which side a resolution keeps. Final on purpose: there are two.
public enum ConflictSide: Sendable, Hashable {
    /// The edit made here: sent again on the server's version.
    case mine
    /// The server's record: the edit is given up.
    case theirs
}

/// The table of kept conflicts, `depot_conflicts`: one row per outbox entry
/// in state `conflict`.
enum ConflictTable {
    static let name = "depot_conflicts"

    static func create(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE IF NOT EXISTS \(name) (
                entry INTEGER PRIMARY KEY,
                typeName TEXT NOT NULL,
                recordKind TEXT,
                recordID TEXT,
                base BLOB NOT NULL,
                mine BLOB NOT NULL,
                theirs BLOB,
                theirTag TEXT,
                theirCounter INTEGER,
                fields BLOB NOT NULL,
                createdAt DATETIME NOT NULL
            );
            CREATE INDEX IF NOT EXISTS \(name)_record ON \(name)(recordKind, recordID);
            """)
    }

    static func insert(_ conflict: OutboxConflict, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO \(name) (entry, typeName, recordKind, recordID, base, mine, theirs, theirTag, theirCounter, fields, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                conflict.id.rawValue, conflict.typeName, conflict.record?.kind, conflict.record?.id, conflict.base, conflict.mine, conflict.theirs,
                conflict.theirVersion?.entityTag, conflict.theirVersion?.counter, try JSONEncoder().encode(conflict.fields), conflict.createdAt,
            ])
    }

    static func conflict(_ row: Row) -> OutboxConflict {
        let kind: String? = row["recordKind"], id: String? = row["recordID"], tag: String? = row["theirTag"]
        return OutboxConflict(
            id: OutboxEntry.ID(rawValue: row["entry"]), typeName: row["typeName"],
            record: kind.flatMap { kind in id.map { RecordKey(kind, $0) } },
            fields: (try? JSONDecoder().decode([FieldConflict].self, from: row["fields"] as Data)) ?? [],
            theirVersion: tag.map { RecordVersion(entityTag: $0, counter: row["theirCounter"]) },
            createdAt: row["createdAt"], base: row["base"], mine: row["mine"], theirs: row["theirs"])
    }

    static func all(_ db: Database) throws -> [OutboxConflict] {
        try Row.fetchAll(db, sql: "SELECT * FROM \(name) ORDER BY entry").map(conflict)
    }

    static func one(_ entry: Int64, _ db: Database) throws -> OutboxConflict? {
        try Row.fetchOne(db, sql: "SELECT * FROM \(name) WHERE entry = ?", arguments: [entry]).map(conflict)
    }

    static func delete(_ entry: Int64, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM \(name) WHERE entry = ?", arguments: [entry])
    }
}
