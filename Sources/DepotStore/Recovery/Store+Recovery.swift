import Depot
import Foundation
import GRDB
import Synchronization

/// A store's recoveries: the last one, its subscribers, and the one under way.
final class RecoveryCenter: Sendable {
    struct State {
        var last: StoreRecovery?
        var subscribers: [UInt64: AsyncStream<StoreRecovery>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        /// The check or rebuild under way: failures meanwhile join it.
        var healing: Task<StoreRecovery?, any Error>?
        /// Set when a rebuild at open salvaged outbox entries before any
        /// ``Outbox`` registered their types: the first one re-applies their
        /// optimistic changes.
        var reapplyPending = false
    }

    let state: Mutex<State>
    /// How the store was opened: what a rebuild in place salvages and migrates.
    let opening: StoreOpening?

    init(opening: StoreOpening?, last: StoreRecovery?) {
        self.opening = opening
        self.state = Mutex(State(last: last, reapplyPending: (last?.keptPendingWrites ?? 0) > 0))
    }
}

extension Store {
    /// The last time this store rebuilt its damaged file, at open or since;
    /// `nil` if it never did. Check it after opening: a rebuild at open
    /// happens before anyone can subscribe to ``recoveries()``.
    public var lastRecovery: StoreRecovery? {
        recoveryCenter.state.withLock { $0.last }
    }

    /// Every rebuild of a file damaged during use, from now on. The
    /// sequence ends when its iterator is released.
    ///
    /// ```swift
    /// for await recovery in store.recoveries() {
    ///     showBanner(recovery.description)
    /// }
    /// ```
    public func recoveries() -> StoreRecoveries {
        let (stream, continuation) = AsyncStream<StoreRecovery>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = recoveryCenter.state.withLock { state in
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak center = recoveryCenter] _ in
            _ = center?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return DepotStream(stream)
    }

    /// Checks the file (SQLite's `integrity_check`) and, if it is damaged,
    /// rebuilds it in place as at open (see ``CorruptionPolicy``): the
    /// damaged file is copied aside under a dated name, what is precious
    /// is salvaged, and a fresh, migrated database with the salvage replaces
    /// the contents of the file. Reads and writes wait meanwhile; live
    /// results then show the rebuilt contents, and syncs refill the rest.
    ///
    /// The store calls this itself when SQLite reports damage
    /// (`SQLITE_CORRUPT`, `SQLITE_NOTADB`) or an I/O error to one of its
    /// reads or writes. The failed access still fails; later ones find the
    /// rebuilt file.
    ///
    /// - Returns: The recovery, or `nil` if the file is sound (or the store
    ///   is in memory, or read-only).
    /// - Throws: `.storage` if the file is damaged and the store's policy is
    ///   ``CorruptionPolicy/fail``, or if the rebuild itself failed.
    @discardableResult
    public func recoverIfDamaged() async throws(DepotError) -> StoreRecovery? {
        let task = recoveryCenter.state.withLock { state in
            if let healing = state.healing { return healing }
            let task = Task { try await self.checkAndRebuild() }
            state.healing = task
            return task
        }
        let result = await task.result
        recoveryCenter.state.withLock { state in
            if state.healing == task { state.healing = nil }
        }
        switch result {
        case .success(let recovery): return recovery
        case .failure(let error): throw DepotError.storage(error, detail: "cannot rebuild the damaged store")
        }
    }

    /// Starts a check of the file if `error`, from one of the store's reads
    /// or writes, says it may be damaged.
    func noticeFailure(_ error: any Error) {
        guard StoreDamage.isDamage(error) || StoreDamage.isIOError(error), !isClosing else { return }
        Task { _ = try? await recoverIfDamaged() }
    }

    private func checkAndRebuild() async throws -> StoreRecovery? {
        guard let opening = recoveryCenter.opening, let pool = writer as? DatabasePool else { return nil }
        let date = environment.date()
        let recovery = try await pool.barrierWriteWithoutTransaction { db -> StoreRecovery? in
            guard let damage = Self.damage(in: db) else { return nil }
            guard opening.onCorruption.precious != nil else { throw damage }
            let damagedFile = StoreDamage.copyAside(opening.path, date: date)
            let salvage = Salvage.read(opening.salvageTargets, from: db)
            let fresh = try DatabaseQueue()
            try fresh.writeWithoutTransaction { fresh in
                // The backup below needs the file's page size; eviction, its vacuum mode.
                let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
                try fresh.execute(sql: "PRAGMA page_size = \(pageSize)")
                if opening.retention?.sizeBudget != nil { try fresh.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL") }
            }
            try Store.prepare(fresh, migrator: opening.migrator)
            let types = self.mutationTypes.withLock { $0 }
            let outcome = try fresh.write { fresh in
                let outcome = salvage.write(into: fresh)
                // The salvaged entries' optimistic changes were in rows that are gone.
                try OutboxTable.reapplyPending(fresh, types: types)
                return outcome
            }
            if types.isEmpty, outcome.kept[OutboxTable.name, default: 0] > 0 {
                self.recoveryCenter.state.withLock { $0.reapplyPending = true }
            }
            // SQLite's backup writes the fresh pages over the file through this
            // connection: every connection of the pool, and of other processes,
            // reads the rebuilt database from its next transaction.
            try fresh.inDatabase { fresh in try fresh.backup(to: db) }
            try db.inTransaction(.deferred) {
                try db.notifyChanges(in: .fullDatabase)
                return .commit
            }
            return StoreRecovery(
                damagedFile: damagedFile, error: DepotError.storage(damage, detail: "the store at \(opening.path) is damaged"),
                kept: outcome.kept, lost: outcome.lost, incomplete: outcome.incomplete, date: date)
        }
        guard let recovery else { return nil }
        pool.invalidateReadOnlyConnections()
        announce(recovery)
        return recovery
    }

    /// The damage `integrity_check` finds, or `nil` if the file is sound.
    /// Slower than `quick_check`, it also finds indexes that disagree with
    /// their tables; it runs only after a failure, or when asked.
    private static func damage(in db: Database) -> DatabaseError? {
        do {
            let findings = try String.fetchAll(db, sql: "PRAGMA integrity_check(20)")
            guard findings != ["ok"] else { return nil }
            return DatabaseError(resultCode: .SQLITE_CORRUPT, message: findings.prefix(3).joined(separator: "; "))
        } catch let error as DatabaseError {
            return error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB || error.resultCode == .SQLITE_IOERR ? error : nil
        } catch {
            return nil
        }
    }

    /// Re-applies the optimistic changes of the outbox entries a rebuild
    /// salvaged, once, if no outbox had registered their types at the time.
    func reapplyAfterRecovery(types: [String: any Mutation.Type]) async {
        let due = recoveryCenter.state.withLock { state in
            defer { state.reapplyPending = false }
            return state.reapplyPending
        }
        guard due else { return }
        _ = try? await write { db in try OutboxTable.reapplyPending(db, types: types) }
    }

    /// Keeps `recovery` as the last, and tells subscribers and NotificationCenter.
    func announce(_ recovery: StoreRecovery) {
        let subscribers = recoveryCenter.state.withLock { state in
            state.last = recovery
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.yield(recovery) }
        NotificationCenter.default.post(
            name: .depotStoreRecovered, object: self, userInfo: [StoreRecovery.UserInfoKey.recovery: recovery])
    }
}
