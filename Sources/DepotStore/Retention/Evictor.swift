import Depot
import Foundation
import GRDB
import Logging
import Synchronization

/// Runs a store's ``Retention``: one eviction at a time, in bounded batches,
/// at launch, after syncs (coalesced) and on demand.
final class Evictor: Sendable {
    let retention: Retention
    let watch: RetentionWatch

    private struct State {
        /// The last run queued: a new one starts after it.
        var tail: Task<Void, Never>?
        /// A run waiting for its delay: later syncs join it.
        var waiting: Task<Void, Never>?
        var runs = 0
        var lastError: DepotError?
    }

    private let state = Mutex(State())
    /// Called after each batch with the report so far: tests run a sync there.
    let afterBatch = Mutex<(@Sendable (EvictionReport) async -> Void)?>(nil)
    /// Called when the size budget's pass has picked a batch, before it
    /// deletes it: tests commit there.
    let afterBudgetPicks = Mutex<(@Sendable () async -> Void)?>(nil)

    /// How often a run chooses its rows again because a sync changed the
    /// table between two batches, before it leaves the rest to the next run.
    static let maximumRestarts = 8

    init(retention: Retention) {
        self.retention = retention
        self.watch = RetentionWatch(tables: retention.policies.map(\.table))
    }

    /// How many runs started: a burst of syncs makes one.
    var runs: Int { state.withLock { $0.runs } }
    /// The error of the last scheduled run that failed, if one did.
    var lastError: DepotError? { state.withLock { $0.lastError } }

    /// Runs an eviction `delay` from now, unless one is already waiting to
    /// start (then this call joins it). Returns at once.
    func schedule(_ store: Store, after delay: Duration) {
        state.withLock { state in
            guard state.waiting == nil else { return }
            let clock = retention.clock
            state.waiting = Task.detached(priority: .utility) { [weak store] in
                if delay > .zero { try? await clock.sleep(for: delay) }
                // One step from waiting to queued, so that `idle()` never
                // sees neither.
                self.state.withLock { state in
                    state.waiting = nil
                    if let store { _ = self.enqueue(store, in: &state, inBackground: true) }
                }
            }
        }
    }

    /// Queues an eviction now, without waiting for it: the one at launch.
    /// An ``evict(_:)`` called after this runs after it.
    func start(_ store: Store) {
        state.withLock { state in _ = enqueue(store, in: &state, inBackground: true) }
    }

    /// A background run failed: nobody awaits it, so it is kept and logged.
    private func failed(_ error: DepotError) {
        state.withLock { $0.lastError = error }
        retention.logger.error("background eviction failed", metadata: ["depot.error": "\(error)"])
    }

    /// Whether an eviction waits for its delay: syncs now join it.
    var isScheduled: Bool { state.withLock { $0.waiting != nil } }

    /// Runs an eviction now, after the one under way if there is one.
    func evict(_ store: Store) async throws(DepotError) -> EvictionReport {
        let run = state.withLock { state in enqueue(store, in: &state) }
        return try await run.value.get()
    }

    /// Queues a run after the last one queued. A run `inBackground` (nobody
    /// awaits it) reports its failure before it ends, so that ``idle()``
    /// returns after the report.
    private func enqueue(_ store: Store, in state: inout State, inBackground: Bool = false) -> Task<Result<EvictionReport, DepotError>, Never> {
        let previous = state.tail
        let run = Task.detached(priority: .utility) { () async -> Result<EvictionReport, DepotError> in
            await previous?.value
            do throws(DepotError) {
                return .success(try await self.run(store))
            } catch {
                // A store closed under a background run: nothing failed.
                if inBackground, !store.isClosing { self.failed(error) }
                return .failure(error)
            }
        }
        state.tail = Task { _ = await run.value }
        return run
    }

    /// Returns when no eviction waits or runs.
    func idle() async {
        while true {
            let (waiting, tail) = state.withLock { ($0.waiting, $0.tail) }
            await waiting?.value
            await tail?.value
            let settled = state.withLock { $0.waiting == nil && $0.tail == tail }
            if settled { return }
        }
    }

    // MARK: - A run

    private func run(_ store: Store) async throws(DepotError) -> EvictionReport {
        state.withLock { $0.runs += 1 }
        let policies = retention.policies
        let plans = try await store.read { db in
            try policies.map { policy throws(DepotError) in try EvictionPlan.resolve(policy, in: db) }
        }
        var report = EvictionReport()
        var retained = RetainedRows()
        for plan in plans {
            try await evict(plan, in: store, report: &report, retained: &retained)
        }
        if let budget = retention.sizeBudget {
            try await enforce(budget, plans: plans, in: store, report: &report, retained: &retained)
        }
        return report
    }

    private func evict(_ plan: EvictionPlan, in store: Store, report: inout EvictionReport, retained: inout RetainedRows) async throws(DepotError) {
        let batchSize = max(1, retention.batchSize)
        let vacuums = retention.sizeBudget != nil
        var restarts = 0
        choosing: while true {
            // Read before the rows: a commit after this is seen by the batches
            // (another process's too, from the look that comes first).
            try await store.refreshFromOtherProcesses()
            let generation = watch.generation(of: plan.table)
            let now = store.currentDate()
            var candidates = try await store.read { db in try plan.candidates(in: db, now: now) }
            var shown = ShownRows()
            if plan.results {
                shown.refresh(plan, store.liveResults)
                candidates.removeAll { !$0.byLimit && shown.keys.contains($0.key) }
            }
            var index = 0
            while index < candidates.count {
                var batch = Array(candidates[index..<min(index + batchSize, candidates.count)])
                index += batchSize
                if plan.results, shown.refresh(plan, store.liveResults) {
                    batch.removeAll { !$0.byLimit && shown.keys.contains($0.key) }
                }
                let keys = batch.map(\.key)
                let types = store.mutationTypes.withLock { $0 }
                let known = retained
                let watch = watch
                let outcome = try await store.write { db -> (deleted: Int, retained: RetainedRows)? in
                    // A commit since the rows were chosen (here, or by
                    // another process) may have changed which rows the rules
                    // take: choose again.
                    guard try !store.noticeOtherConnections(db), watch.generation(of: plan.table) == generation else { return nil }
                    watch.markEvicting()
                    var retained = known
                    try retained.refresh(db, types: types)
                    let kept = retained.keys(of: plan.table, keyColumns: plan.keyColumns)
                    let deleted = try plan.delete(kept.isEmpty ? keys : keys.filter { !kept.contains($0) }, in: db)
                    if vacuums, deleted > 0 { try db.execute(sql: "PRAGMA incremental_vacuum") }
                    return (deleted, retained)
                }
                guard let outcome else {
                    restarts += 1
                    guard restarts <= Self.maximumRestarts else { return }
                    continue choosing
                }
                retained = outcome.retained
                report.add([plan.table: outcome.deleted])
                await betweenBatches(report)
            }
            return
        }
    }

    /// Over the budget: the oldest unprotected rows of every policy's table,
    /// a batch at a time, until the pages fit or nothing is left to take.
    private func enforce(_ budget: Int, plans: [EvictionPlan], in store: Store, report: inout EvictionReport, retained: inout RetainedRows) async throws(DepotError) {
        let batchSize = max(1, retention.batchSize)
        try await store.write { db in
            try db.execute(sql: "PRAGMA incremental_vacuum")
        }
        var size = try await store.read(Self.usedBytes)
        var restarts = 0
        while size > budget {
            // As a policy's pass: a commit after this, here or by another
            // process, makes the batch pick again.
            try await store.refreshFromOtherProcesses()
            let generations = plans.map { self.watch.generation(of: $0.table) }
            let kept = plans.map { retained.keys(of: $0.table, keyColumns: $0.keyColumns) }
            let picks = try await store.read { db in
                var all: [(table: Int, candidate: EvictionPlan.Candidate)] = []
                for (index, plan) in plans.enumerated() {
                    let rows = try plan.oldest(batchSize + kept[index].count, in: db)
                    all += rows.filter { !kept[index].contains($0.key) }.map { (index, $0) }
                }
                // Oldest first across policies; rows without a date last.
                all.sort { ($0.candidate.age ?? .infinity) < ($1.candidate.age ?? .infinity) }
                return Array(all.prefix(batchSize))
            }
            guard !picks.isEmpty else { break }
            if let afterBudgetPicks = afterBudgetPicks.withLock({ $0 }) { await afterBudgetPicks() }
            let types = store.mutationTypes.withLock { $0 }
            let known = retained
            let watch = watch
            let outcome = try await store.write { db -> (deleted: [String: Int], retained: RetainedRows)? in
                guard try !store.noticeOtherConnections(db), plans.map({ watch.generation(of: $0.table) }) == generations else { return nil }
                watch.markEvicting()
                var retained = known
                try retained.refresh(db, types: types)
                var deleted: [String: Int] = [:]
                for (index, plan) in plans.enumerated() {
                    let kept = retained.keys(of: plan.table, keyColumns: plan.keyColumns)
                    let keys = picks.filter { $0.table == index }.map(\.candidate.key).filter { !kept.contains($0) }
                    deleted[plan.table, default: 0] += try plan.delete(keys, in: db)
                }
                try db.execute(sql: "PRAGMA incremental_vacuum")
                return (deleted, retained)
            }
            guard let outcome else {
                restarts += 1
                guard restarts <= Self.maximumRestarts else { break }
                continue
            }
            retained = outcome.retained
            guard outcome.deleted.values.contains(where: { $0 > 0 }) else { break }
            report.add(outcome.deleted)
            await betweenBatches(report)
            size = try await store.read(Self.usedBytes)
        }
        report.databaseSize = size
    }

    private func betweenBatches(_ report: EvictionReport) async {
        if let afterBatch = afterBatch.withLock({ $0 }) { await afterBatch(report) }
        // The writer is free now: a sync waiting for it goes first.
        await Task.yield()
    }

    /// The bytes the database's pages take, free pages left out.
    @Sendable static func usedBytes(_ db: Database) throws -> Int {
        let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
        let free = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
        let size = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
        return (pages - free) * size
    }
}

/// The rows that queued mutations retain, read in each batch's transaction;
/// mutations already rebuilt are not decoded again.
struct RetainedRows: Sendable {
    private var byEntry: [Int64: [RetainedRow]] = [:]

    mutating func refresh(_ db: Database, types: [String: any Mutation.Type]) throws {
        guard !types.isEmpty else { return }
        let ids = Set(try Int64.fetchAll(db, sql: "SELECT id FROM \(OutboxTable.name)"))
        byEntry = byEntry.filter { ids.contains($0.key) }
        guard ids.contains(where: { byEntry[$0] == nil }) else { return }
        for row in try Row.fetchAll(db, sql: "SELECT id, typeName, payload FROM \(OutboxTable.name)") {
            let id: Int64 = row["id"]
            guard byEntry[id] == nil else { continue }
            // A mutation that cannot be rebuilt names no rows (the outbox marks it failed).
            guard let type = types[row["typeName"]], let mutation = try? Outbox.rebuild(type, from: row["payload"]) else {
                byEntry[id] = []
                continue
            }
            byEntry[id] = mutation.retainedRows
        }
    }

    func keys(of table: String, keyColumns: [String]) -> Set<[DatabaseValue]> {
        var keys = Set<[DatabaseValue]>()
        for rows in byEntry.values {
            for row in rows where row.table.caseInsensitiveCompare(table) == .orderedSame {
                if let key = row.key(in: keyColumns) { keys.insert(key) }
            }
        }
        return keys
    }
}

/// The keys live results show, read again only when a results controller delivered.
private struct ShownRows {
    var keys: Set<[DatabaseValue]> = []
    var generation: UInt64?

    /// Returns whether the keys changed.
    @discardableResult
    mutating func refresh(_ plan: EvictionPlan, _ live: LiveResults) -> Bool {
        let current = live.generation
        guard current != generation else { return false }
        generation = current
        keys = live.keys(of: plan.table, keyColumns: plan.keyColumns)
        return true
    }
}
