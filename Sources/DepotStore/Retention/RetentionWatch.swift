import Foundation
import GRDB
import Synchronization

/// Counts the commits that changed each policy table, other than eviction's
/// own, so that an eviction notices that the rows it chose may have changed
/// (a sync wrote between two batches) and chooses again.
///
/// It stops listening once every policy table changed in a transaction, so
/// a sync of one table costs one call per transaction, not one per row. Its callbacks run on the
/// writer's queue; the state is behind a mutex because eviction reads it
/// from its own batches (on that queue too) and tests read it from anywhere.
final class RetentionWatch: TransactionObserver, Sendable {
    private struct State {
        var generations: [String: UInt64] = [:]
        var changed: Set<String> = []
        var evicting = false
    }

    private let tables: Set<String>
    private let state = Mutex(State())

    init(tables: some Sequence<String>) {
        self.tables = Set(tables.map { $0.lowercased() })
    }

    /// How many commits other than eviction's changed `table`.
    func generation(of table: String) -> UInt64 {
        state.withLock { $0.generations[table.lowercased(), default: 0] }
    }

    /// Marks the current transaction as eviction's own: its commit is not counted.
    func markEvicting() {
        state.withLock { $0.evicting = true }
    }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        tables.contains(eventKind.tableName.lowercased())
    }

    func databaseDidChange(with event: DatabaseEvent) {
        let table = event.tableName.lowercased()
        let all = state.withLock { state in
            state.changed.insert(table)
            return state.changed.count == tables.count
        }
        if all { stopObservingDatabaseChangesUntilNextTransaction() }
    }

    /// `Database.notifyChanges(in:)`: another process wrote, no one knows
    /// which of the tables.
    func databaseDidChange() {
        state.withLock { $0.changed.formUnion(tables) }
        stopObservingDatabaseChangesUntilNextTransaction()
    }

    func databaseDidCommit(_ db: Database) {
        state.withLock { state in
            if !state.evicting {
                for table in state.changed { state.generations[table, default: 0] &+= 1 }
            }
            state.changed.removeAll()
            state.evicting = false
        }
    }

    func databaseDidRollback(_ db: Database) {
        state.withLock { state in
            state.changed.removeAll()
            state.evicting = false
        }
    }
}
