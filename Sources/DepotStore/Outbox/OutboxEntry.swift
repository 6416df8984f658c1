import Depot
import Foundation
import GRDB

/// One mutation waiting in the outbox, as stored.
public struct OutboxEntry: Sendable, Hashable, Identifiable {
    /// The entry's id, increasing in the order mutations were sent.
    public struct ID: Hashable, Sendable, Comparable, CustomStringConvertible {
        /// The row id.
        public let rawValue: Int64
        /// The id of row `rawValue`, as a list shows it ("#3" is 3).
        public init(rawValue: Int64) {
            self.rawValue = rawValue
        }
        public static func < (lhs: ID, rhs: ID) -> Bool { lhs.rawValue < rhs.rawValue }
        public var description: String { "#\(rawValue)" }
    }

    /// What the entry waits for.
    public struct State: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Waiting to be sent, or being sent.
        public static let pending = State(name: "pending")
        /// Stopped: its type is not registered, its payload cannot be
        /// decoded, or (a ``VersionedEdit``) the server's record in a conflict
        /// cannot be read. It blocks nothing; ``Outbox/retry(_:)`` puts it
        /// back, ``Outbox/discard(_:)`` removes it.
        public static let failed = State(name: "failed")
        /// In conflict with the server's version, kept for the user: it holds
        /// back its lane until ``Outbox/resolveConflict(_:keeping:)`` or
        /// ``Outbox/resolveConflict(_:with:)`` (see ``VersionedEdit``).
        public static let conflict = State(name: "conflict")
        public var description: String { name }
    }

    /// The entry's id.
    public var id: ID
    /// The mutation type's ``Mutation/typeName``.
    public var typeName: String
    /// The ordering lane.
    public var lane: String
    /// The key every attempt sends as `Idempotency-Key`.
    public var idempotencyKey: String
    /// Pending, failed, or in conflict.
    public var state: State
    /// Attempts that reached no final answer so far.
    public var attempts: Int
    /// The last error, in words, if an attempt failed.
    public var lastError: String?
    /// When it was sent (queued).
    public var createdAt: Date
    /// The record it changes (``Mutation/record``), if it said.
    public var record: RecordKey?
}

/// The outbox table, in the app's own store (created by ``Store`` like the sync ledger).
enum OutboxTable {
    static let name = "depotOutbox"

    static func create(_ db: Database) throws {
        try db.create(table: name, ifNotExists: true) { table in
            table.autoIncrementedPrimaryKey("id")
            table.column("typeName", .text).notNull()
            table.column("lane", .text).notNull()
            table.column("payload", .blob).notNull()
            table.column("idempotencyKey", .text).notNull().unique()
            table.column("state", .text).notNull().defaults(to: "pending")
            table.column("attempts", .integer).notNull().defaults(to: 0)
            table.column("lastError", .text)
            table.column("createdAt", .datetime).notNull()
            table.column("claimedBy", .text)
            table.column("claimPID", .integer)
            table.column("claimExpires", .double)
            table.column("recordKind", .text)
            table.column("recordID", .text)
        }
        try addClaimColumns(db)
        try db.create(index: "\(name)_lane", on: name, columns: ["lane", "id"], ifNotExists: true)
        try db.create(index: "\(name)_record", on: name, columns: ["recordKind", "recordID"], ifNotExists: true)
        try RecordVersions.createTable(db)
        try ConflictTable.create(db)
    }

    /// The columns of an entry's claim (see ``Outbox`` "One sender per
    /// outbox"): the claiming outbox's id, its process id, and the claim's
    /// expiry in seconds since 1970. All NULL: nobody sends it.
    static let claimColumns: [(name: String, type: Database.ColumnType)] = [("claimedBy", .text), ("claimPID", .integer), ("claimExpires", .double)]

    /// The columns of the record an entry changes (``Mutation/record``).
    static let recordColumns: [(name: String, type: Database.ColumnType)] = [("recordKind", .text), ("recordID", .text)]

    /// Whether the table is in place, with the claim and record columns,
    /// next to the record versions and conflicts.
    static func isCurrent(_ db: Database) throws -> Bool {
        guard try db.tableExists(name), try db.tableExists(RecordVersions.tableName), try db.tableExists(ConflictTable.name) else { return false }
        let columns = Set(try db.columns(in: name).map(\.name))
        return (claimColumns + recordColumns).allSatisfy { columns.contains($0.name) }
    }

    /// Adds the claim and record columns an older outbox table lacks; their
    /// NULLs say that nobody is sending its entries, and that they name no record.
    static func addClaimColumns(_ db: Database) throws {
        let columns = Set(try db.columns(in: name).map(\.name))
        for column in claimColumns + recordColumns where !columns.contains(column.name) {
            try db.execute(sql: "ALTER TABLE \(name) ADD COLUMN \(column.name) \(column.type.rawValue)")
        }
    }

    /// Applies every queued mutation's optimistic change again, oldest
    /// first, inside the caller's transaction: after a refresh merged the
    /// server's rows, what the user did and the server has not confirmed is
    /// still what the user sees (Firestore's latency compensation).
    static func reapplyPending(_ db: Database, types: [String: any Mutation.Type]) throws {
        guard !types.isEmpty else { return }
        let rows = try Row.fetchAll(db, sql: "SELECT typeName, payload FROM \(name) ORDER BY id")
        for row in rows {
            guard let type = types[row["typeName"]], let mutation = try? Outbox.rebuild(type, from: row["payload"]) else { continue }
            try mutation.applyOptimistically(db)
        }
    }

    static func entry(_ row: Row) -> OutboxEntry {
        OutboxEntry(
            id: OutboxEntry.ID(rawValue: row["id"]),
            typeName: row["typeName"],
            lane: row["lane"],
            idempotencyKey: row["idempotencyKey"],
            state: OutboxEntry.State(name: row["state"]),
            attempts: row["attempts"],
            lastError: row["lastError"],
            createdAt: row["createdAt"],
            record: (row["recordKind"] as String?).flatMap { kind in (row["recordID"] as String?).map { RecordKey(kind, $0) } }
        )
    }
}
