import CoreMetrics
import Depot
import Foundation
import GRDB
import Synchronization

/// Writes that survive: a durable queue of ``Mutation``s in the app's own
/// store, delivered exactly once to a server that honours `Idempotency-Key`.
///
/// ``send(_:)`` stores the mutation, its idempotency key and its optimistic
/// change in ONE transaction and returns after that commit, before any byte
/// leaves. From then on the mutation survives offline periods, quits and
/// crashes: it goes out as soon as it can, on every ``start()`` (at launch),
/// while the controller waits for the network, and after transient failures
/// with backoff. Every attempt carries the same key. The answer decides:
///
/// | answer | what happens |
/// |---|---|
/// | 2xx (a replayed answer too) | ``Mutation/commit(_:_:)`` and the row's removal, in one transaction |
/// | still processing (``Mutation/isStillProcessing(_:)``), 408, 429, 5xx, no network, a lost connection, a timeout | stays queued; tried again after a backoff |
/// | 401 (to the mutation, or to a conflict's read of the server's record) | its lane is held until credentials come back: a ``/Depot/TokenAuthenticator`` sign-in or refresh resumes it by itself; ``resumeHeld()`` does so for credentials the app manages |
/// | 412, or 404 and 410, to a ``VersionedEdit`` (an edit based on a version the server no longer has) | a conflict: merged and sent again, the server's record accepted, or kept for the user (see ``VersionedEdit``) |
/// | any other status (400, 403, 404, 409, 410, 422, …) | ``Mutation/rollback(_:_:)`` and the row's removal, in one transaction |
///
/// Lanes: mutations of one ``Mutation/lane`` go strictly in order, one at a
/// time; lanes run in parallel within the controller's concurrency limit. A
/// permanent failure is rolled back and removed, so it blocks neither its own
/// lane nor the others. A conflict kept for the user holds its own lane (the
/// later changes of that record wait for it), and no other.
///
/// For example:
///
/// ```swift
/// let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
/// try await outbox.start()                          // what earlier launches left
/// let ticket = try await outbox.send(SendPost(payload: .init(localID: "local-1", text: "hi")))
/// // The pending row is on screen now; later:
/// let answer = await ticket.outcome()
/// ```
///
/// One sender per entry, across processes: an app and its extension, or two
/// command-line runs, may share the store file. Before an entry goes out its
/// outbox writes a claim on it (its own random id and an expiry,
/// `claimDuration` from the store's date), in the transaction that picks it,
/// and renews it before every attempt; the entry's commit, rollback or failure
/// removes it, and so does an attempt that ends without an answer. Another
/// outbox never sends an entry under a claim that is not its own and has not
/// expired: its lane waits on the controller's clock until the claim expires,
/// then looks again (earlier if the claiming process no longer exists).
/// Every attempt ends (its total timeout is capped) before two thirds of the
/// claim have passed, so a claim outlives every attempt made under it. An
/// entry can therefore reach the server twice only after an attempt without
/// an answer: a lost connection, a timeout, or a process killed (or stopped,
/// or suspended past the claim) while its request was out.
///
/// At ``/Depot/NetworkController/shutdown(grace:)`` sends get the grace period (their
/// exit policy is `.finish`); whatever is left stays in the store and goes
/// out on the next launch. Closing the store stops the lanes; what they had
/// not settled stays queued.
public final class Outbox: Sendable {
    /// Where the mutations wait, and what their commits and rollbacks change.
    public let store: Store
    /// What sends them.
    public let controller: NetworkController

    let types: [String: any Mutation.Type]
    /// Whether lanes wait out offline spells and failures (apps), or stop at
    /// the first attempt without a final answer (one-shot tools).
    let waitsForNetwork: Bool
    let state = Mutex(State())
    /// `depot.outbox.pending`, when the controller's configuration has a metrics backend.
    let pendingGauge: Gauge?
    /// This outbox's name in the claims it writes: other outboxes on the
    /// file, in this process or another, do not send what it claimed.
    let claimant = UUID().uuidString
    /// How long a claim lasts after it was written or renewed.
    let claimDuration: Duration

    struct State {
        /// Lanes a delivery loop runs for, and whether something was queued
        /// on them since the loop last looked.
        var running: [String: Bool] = [:]
        /// The delivery loops' tasks, for ``waitUntilIdle()``.
        var loops: [String: Task<Void, Never>] = [:]
        /// Lanes stopped by a 401.
        var held: Set<String> = []
        /// The queue's counts, kept as the outbox changes it (a snapshot then
        /// reads no database); `nil` until read, and after a change that is
        /// easier to read again (a failure, a retry, a discard).
        var counted: (pending: Int, failed: [OutboxEntry], conflicts: [OutboxConflict])?
        /// Bumped by every change of the queue, so that a count read that
        /// raced one is not kept.
        var countGeneration: UInt64 = 0
        /// Writes of the queue under way: a count read while one is may or
        /// may not include it, so it is not kept.
        var countChanges = 0
        /// Whether the store has closed: nothing in this process decides an
        /// entry that is not being sent now.
        var storeClosed = false
        /// Lanes in their backoff pause after a failure.
        var pausing: Set<String> = []
        /// Entries taken by a delivery loop and not yet decided.
        var inFlight: Set<Int64> = []
        /// Entries of `inFlight` whose attempt waits for the network.
        var waitingForNetwork: Set<Int64> = []
        /// Bumped whenever credentials come back, so that a 401 answered to
        /// an attempt that began before does not hold its lane.
        var credentialsEpoch: UInt64 = 0
        var waiters: [Int64: [CheckedContinuation<Result<NetworkResponse, DepotError>, Never>]] = [:]
        /// The latest outcomes, for a caller that asks after the fact.
        var outcomes: [Int64: (result: Result<NetworkResponse, DepotError>, step: OutboxChange.Step)] = [:]
        var outcomeOrder: [Int64] = []
        /// The latest permanent failures, for ``OutboxSnapshot/rolledBack``.
        var rolledBack: [OutboxFailure] = []
        var subscribers: [UInt64: AsyncStream<OutboxSnapshot>.Continuation] = [:]
        /// ``changes()`` subscribers, by registration.
        var changeSubscribers: [UInt64: AsyncStream<OutboxChange>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        /// Changes are numbered before their snapshot is read; a snapshot is
        /// published only if no later one was, so the last one seen is current.
        var changeCount: UInt64 = 0
        var publishedChange: UInt64 = 0
        /// The entries this outbox has claimed, and when it last wrote each claim.
        var claims: [Int64: Date] = [:]
        /// Claimed entries whose claim another outbox took over before an
        /// attempt: their lane looks again instead of deciding them.
        var lostClaims: Set<Int64> = []
        /// How many times in a row each entry was rebased after a conflict.
        var rebases: [Int64: Int] = [:]
    }

    /// How long a claim lasts unless ``init(store:controller:types:waitsForNetwork:claimDuration:)`` says otherwise.
    public static let defaultClaimDuration: Duration = .seconds(60)

    /// The gauge of mutations queued and not yet decided.
    static let pendingGaugeLabel = "depot.outbox.pending"
    /// How many decided outcomes are kept for ``outcome(of:)`` calls that come late.
    static let keptOutcomes = 1024
    /// How many rolled-back mutations a snapshot lists.
    static let keptFailures = 50

    /// Makes an outbox.
    ///
    /// - Parameters:
    ///   - store: The app's store: the outbox table lives there, next to the
    ///     rows that commits and rollbacks change.
    ///   - controller: The controller that sends.
    ///   - types: Every mutation type that may be queued, so that a later
    ///     launch can rebuild what an earlier one stored.
    ///   - waitsForNetwork: `true` (apps): a send waits in the controller's
    ///     queue while offline, and an attempt without a final answer (5xx,
    ///     429, a lost connection) is tried again after a backoff. `false`
    ///     (one-shot tools): such an attempt leaves its entry queued and stops
    ///     its lane until the next ``start()`` or ``send(_:)``, so that
    ///     ``waitUntilIdle()`` returns and the tool can say "queued".
    ///   - claimDuration: How long this outbox's claim on an entry it sends
    ///     lasts after each renewal: how long another process sharing the
    ///     store waits before it takes over the entries of one that died while
    ///     sending. Each attempt's total timeout is capped at two thirds of it,
    ///     so that it ends while the claim holds: raise it for mutations whose
    ///     upload takes longer than 40 s.
    public init(store: Store, controller: NetworkController, types: [any Mutation.Type], waitsForNetwork: Bool = true, claimDuration: Duration = Outbox.defaultClaimDuration) {
        self.store = store
        self.controller = controller
        self.waitsForNetwork = waitsForNetwork
        self.claimDuration = claimDuration
        if let factory = controller.configuration.observability.metricsFactory, !(factory is NOOPMetricsHandler) {
            pendingGauge = Gauge(label: Self.pendingGaugeLabel, factory: factory)
        } else {
            pendingGauge = nil
        }
        let types = Dictionary(types.map { ($0.typeName, $0) }, uniquingKeysWith: { first, _ in first })
        self.types = types
        store.mutationTypes.withLock { $0.merge(types) { first, _ in first } }
        // The shutdown grace waits for the lanes too, so a send queued behind
        // another still goes out within it.
        controller.addExitParticipant { [weak self] in
            self?.wakeForShutdown()
            await self?.waitUntilIdle()
            // Nothing changes in this run any more: `changes()` sequences end.
            self?.finishChanges()
        }
        controller.addCredentialsListener { [weak self] in
            guard let self else { return }
            Task { await self.credentialsCameBack() }
        }
        Self.liveClaimants.withLock { _ = $0.insert(claimant) }
        store.whenClosed { [weak self] in self?.storeDidClose() }
    }

    deinit {
        Self.liveClaimants.withLock { _ = $0.remove(claimant) }
    }

    // MARK: - Sending

    /// Queues `mutation` durably and applies its optimistic change, in one
    /// transaction; returns after it committed, before any network attempt.
    ///
    /// - Returns: A ticket to await, cancel or follow the entry.
    /// - Throws: `.invalidRequest` if the type is not registered; `.encoding`
    ///   if the payload cannot be encoded; `.storage` if the transaction fails
    ///   (then nothing was queued and nothing changed).
    @discardableResult
    public func send<M: Mutation>(_ mutation: M) async throws(DepotError) -> OutboxTicket {
        guard types[M.typeName] != nil else {
            throw DepotError(.invalidRequest, operation: M.typeName, detail: "\(M.typeName) is not registered: pass it in Outbox(store:controller:types:)")
        }
        await store.reapplyAfterRecovery(types: types)
        let payload: Data
        do {
            payload = try Self.encoder.encode(mutation.payload)
        } catch {
            throw DepotError(.encoding, operation: M.typeName, underlying: error)
        }
        let key = UUID().uuidString
        let now = store.currentDate()
        let (lane, record) = (mutation.lane, mutation.record)
        let id = try await queueWrite(pendingDelta: 1) { db in
            try db.execute(
                sql: "INSERT INTO \(OutboxTable.name) (typeName, lane, payload, idempotencyKey, createdAt, recordKind, recordID) VALUES (?, ?, ?, ?, ?, ?, ?)",
                arguments: [M.typeName, lane, payload, key, now, record?.kind, record?.id])
            let id = db.lastInsertedRowID
            try mutation.applyOptimistically(db)
            return id
        }
        // Told before the lane starts, so `queued` comes before `sending`.
        await changed(id, .queued)
        kick(lane)
        return OutboxTicket(id: OutboxEntry.ID(rawValue: id), outbox: self)
    }

    /// Starts delivering what is queued, such as what an earlier launch left.
    /// Call it once the app is set up; ``send(_:)`` starts its own lane.
    public func start() async throws(DepotError) {
        await store.reapplyAfterRecovery(types: types)
        let (pending, orphans) = try await store.read { db in
            (try String.fetchAll(db, sql: "SELECT DISTINCT lane FROM \(OutboxTable.name) WHERE state = 'pending'"),
             try String.fetchAll(db, sql: Self.orphanedConflictLanesSQL))
        }
        if !orphans.isEmpty {
            // In conflict, but the conflict record was lost (a rebuilt store
            // keeps the outbox, not the conflicts): sent again, each meets the
            // server's version again and its conflict is found anew.
            try await queueWrite(pendingDelta: nil) { db in
                try db.execute(sql: "UPDATE \(OutboxTable.name) SET state = 'pending' WHERE state = 'conflict' AND id NOT IN (SELECT entry FROM \(ConflictTable.name))")
            }
        }
        let lanes = Set(pending).union(orphans)
        // Another process may have changed the table: count it again.
        invalidateCounts()
        for lane in lanes { kick(lane) }
    }

    /// The lanes of entries in conflict that have no conflict record.
    static let orphanedConflictLanesSQL = "SELECT DISTINCT lane FROM \(OutboxTable.name) WHERE state = 'conflict' AND id NOT IN (SELECT entry FROM \(ConflictTable.name))"

    /// Returns when no delivery loop runs: every lane is empty, held, or
    /// stopped because the controller shut down or the store closed. A
    /// one-shot tool calls it to know that every lane has stopped.
    public func waitUntilIdle() async {
        while let loop = state.withLock({ $0.loops.values.first }) {
            await loop.value
            state.withLock { state in
                if let key = state.loops.first(where: { $0.value == loop })?.key { state.loops[key] = nil }
            }
        }
    }

    /// Lets lanes held by a 401 go again.
    ///
    /// With a ``/Depot/TokenAuthenticator`` there is no need: a sign-in or a
    /// successful refresh resumes held lanes by itself. Call this when the
    /// app manages credentials another way (a ``/Depot/RequestAdapter`` that adds
    /// them) and has new ones.
    public func resumeHeld() async {
        if !(await credentialsCameBack()) { await changed() }
    }

    /// New credentials: held lanes go again, and an entry whose attempt
    /// under way is answered 401 goes once more instead of holding its lane
    /// (once: a second 401 holds it, whatever came back meanwhile).
    @discardableResult
    func credentialsCameBack() async -> Bool {
        let lanes = state.withLock { state -> Set<String> in
            state.credentialsEpoch &+= 1
            defer { state.held.removeAll() }
            return state.held
        }
        guard !lanes.isEmpty else { return false }
        for lane in lanes { kick(lane) }
        await changed()
        return true
    }

    // MARK: - Reading and acting on entries

    /// What is queued, oldest first.
    public func entries() async throws(DepotError) -> [OutboxEntry] {
        try await store.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM \(OutboxTable.name) ORDER BY id").map(OutboxTable.entry)
        }
    }

    /// Waits until the entry is decided: the server's answer once committed,
    /// or the error it was rolled back with.
    ///
    /// An entry decided long ago, or by an earlier launch, is reported as
    /// `.invalidRequest` ("no such entry").
    public func outcome(of id: OutboxEntry.ID) async -> Result<NetworkResponse, DepotError> {
        let key = id.rawValue
        return await withCheckedContinuation { continuation in
            let known = state.withLock { state -> Result<NetworkResponse, DepotError>? in
                if let outcome = state.outcomes[key] { return outcome.result }
                if state.storeClosed, !state.inFlight.contains(key) { return .failure(Self.storeClosed) }
                state.waiters[key, default: []].append(continuation)
                return nil
            }
            if let known {
                continuation.resume(returning: known)
                return
            }
            // Registered: a decision from now on reaches this waiter. One made
            // before is in `outcomes`. Neither, and no row: nothing will come.
            Task {
                let exists = (try? await store.read { db in
                    try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(OutboxTable.name) WHERE id = ?)", arguments: [key])
                }) ?? nil
                guard exists == false else { return }
                self.resolve(key, .failure(DepotError(.invalidRequest, detail: "no outbox entry \(id)")), step: nil, unlessInFlight: true)
            }
        }
    }

    /// Removes a queued entry that is not being sent, rolling its optimistic
    /// change back; its waiters get `.cancelled`.
    ///
    /// - Throws: `.invalidRequest` if the entry is being sent now, here or by
    ///   another process sharing the store (its answer decides it), or does
    ///   not exist.
    public func discard(_ id: OutboxEntry.ID) async throws(DepotError) {
        let key = id.rawValue
        let taken = state.withLock { state in state.inFlight.insert(key).inserted }
        guard taken else { throw DepotError(.invalidRequest, detail: "outbox entry \(id) is being sent") }
        let error = DepotError(.cancelled, detail: "discarded")
        let (claimant, now) = (claimant, store.currentDate())
        enum Found: Sendable { case discarded(lane: String), missing, claimedElsewhere }
        do throws(DepotError) {
            let found = try await queueWrite(pendingDelta: nil) { [types] db -> Found in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(OutboxTable.name) WHERE id = ?", arguments: [key]) else { return .missing }
                if Self.isClaimedElsewhere(row, by: claimant, at: now) != nil { return .claimedElsewhere }
                // A mutation that cannot be rebuilt has nothing to roll back with.
                try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
                try ConflictTable.delete(key, db)
                if let type = types[row["typeName"]], let mutation = try? Self.rebuild(type, from: row["payload"]) {
                    try mutation.rollback(error, db)
                    // What else is queued is still what the user sees.
                    if mutation.record != nil { try OutboxTable.reapplyPending(db, types: types) }
                }
                return .discarded(lane: row["lane"])
            }
            switch found {
            case .discarded(let lane):
                state.withLock { _ = $0.rebases.removeValue(forKey: key) }
                // A discarded conflict held its lane: what waited behind it goes now.
                kick(lane)
            case .missing:
                state.withLock { _ = $0.inFlight.remove(key) }
                throw DepotError(.invalidRequest, detail: "no outbox entry \(id)")
            case .claimedElsewhere:
                state.withLock { _ = $0.inFlight.remove(key) }
                throw DepotError(.invalidRequest, detail: "outbox entry \(id) is being sent by another process")
            }
        } catch {
            leaveInFlight(key)
            throw error
        }
        resolve(key, .failure(error), step: .discarded)
        await changed(key, .discarded)
    }

    /// Puts a failed entry back in its lane.
    ///
    /// - Throws: `.invalidRequest` if there is no such entry, or it is a
    ///   conflict kept for the user: resolve it instead (``resolveConflict(_:keeping:)``).
    public func retry(_ id: OutboxEntry.ID) async throws(DepotError) {
        let lane = try await queueWrite(pendingDelta: nil) { db -> String? in
            if try String.fetchOne(db, sql: "SELECT state FROM \(OutboxTable.name) WHERE id = ?", arguments: [id.rawValue]) == OutboxEntry.State.conflict.name {
                throw DepotError(.invalidRequest, detail: "outbox entry \(id) is a conflict: resolve it, keeping mine or theirs")
            }
            try db.execute(sql: "UPDATE \(OutboxTable.name) SET state = 'pending' WHERE id = ?", arguments: [id.rawValue])
            return try String.fetchOne(db, sql: "SELECT lane FROM \(OutboxTable.name) WHERE id = ?", arguments: [id.rawValue])
        }
        guard let lane else { throw DepotError(.invalidRequest, detail: "no outbox entry \(id)") }
        state.withLock { _ = $0.outcomes.removeValue(forKey: id.rawValue) }
        await changed(id.rawValue, .requeued)
        kick(lane)
    }
}
