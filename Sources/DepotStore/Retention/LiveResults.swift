import Foundation
import GRDB
import Synchronization

/// The rows live ``ResultsController``s show, by table, for
/// ``RetentionReference/results``: each controller leaves its current
/// snapshot here on every delivery (a copy-on-write value, so that costs
/// nothing), and eviction reads the keys only when a policy asks.
final class LiveResults: Sendable {
    /// The primary key values of a snapshot's rows, in the order of the columns given.
    typealias Keys = @Sendable (_ keyColumns: [String]) -> [[DatabaseValue]]

    private struct State {
        var entries: [UInt64: (table: String, keys: Keys)] = [:]
        var next: UInt64 = 0
        /// Bumped by every change, so that eviction reads keys again only after one.
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())

    func register() -> UInt64 {
        state.withLock { state in
            state.next += 1
            return state.next
        }
    }

    func update(_ id: UInt64, table: String, keys: @escaping Keys) {
        state.withLock { state in
            state.entries[id] = (table, keys)
            state.generation &+= 1
        }
    }

    func remove(_ id: UInt64) {
        state.withLock { state in
            if state.entries.removeValue(forKey: id) != nil { state.generation &+= 1 }
        }
    }

    var generation: UInt64 { state.withLock { $0.generation } }

    /// The keys of every row of `table` that a live snapshot shows.
    func keys(of table: String, keyColumns: [String]) -> Set<[DatabaseValue]> {
        let readers = state.withLock { state in
            state.entries.values.filter { $0.table.caseInsensitiveCompare(table) == .orderedSame }.map(\.keys)
        }
        var keys = Set<[DatabaseValue]>()
        for read in readers { keys.formUnion(read(keyColumns)) }
        return keys
    }

    /// How a snapshot of `Record`s tells its keys: the encoded key columns of
    /// an `EncodableRecord`, else the `id` for a one-column key; `nil` when
    /// `Record` is no `TableRecord` (then it names no table).
    static func reader<Record: Identifiable & Sendable>(for snapshot: ResultsSnapshot<Record>) -> (table: String, keys: Keys)? {
        guard let table = (Record.self as? any TableRecord.Type)?.databaseTableName else { return nil }
        return (table, { keyColumns in
            snapshot.fetchedObjects.compactMap { key(of: $0, keyColumns) }
        })
    }

    private static func key<Record: Identifiable>(of record: Record, _ keyColumns: [String]) -> [DatabaseValue]? {
        if let encodable = record as? any EncodableRecord, let values = try? encodable.databaseDictionary {
            let lowercased = Dictionary(values.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { first, _ in first })
            let key = keyColumns.compactMap { lowercased[$0.lowercased()] }
            if key.count == keyColumns.count { return key }
        }
        if keyColumns.count == 1, let id = record.id as? any DatabaseValueConvertible {
            return [id.databaseValue]
        }
        return nil
    }
}
