import Depot
import Foundation
import GRDB
import Synchronization

/// Delivery: one loop per lane, one attempt at a time, and what each answer decides.
extension Outbox {
    // MARK: - Delivery

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    /// Rebuilds a stored mutation (the type is opened from the existential).
    static func rebuild<M: Mutation>(_ type: M.Type, from payload: Data) throws -> M {
        M(payload: try JSONDecoder().decode(M.Payload.self, from: payload))
    }

    /// Starts the lane's delivery loop unless one runs; a running loop is told
    /// to look again before it stops.
    func kick(_ lane: String) {
        state.withLock { state in
            guard !state.held.contains(lane) else { return }
            if state.running[lane] != nil {
                state.running[lane] = true
                return
            }
            state.running[lane] = false
            // Made in the same critical section, so waitUntilIdle() never
            // misses a loop that has started (the task runs after the lock).
            state.loops[lane] = Task { await self.drain(lane) }
        }
    }

    enum Disposition {
        /// Decided (committed, rolled back or failed): next entry.
        case decided(OutboxChange.Step)
        /// Not decided: try the same entry again after a backoff.
        case again(DepotError)
        /// 401: hold the lane.
        case held
        /// The controller is shut down or the task cancelled: leave it queued.
        case stop
        /// Another outbox took the entry over before an attempt: look again.
        case claimLost
        /// A conflict was merged: the entry, rebased, goes again now.
        case rebased
        /// A conflict was kept for the user: the lane waits for its resolution.
        case kept
    }

    /// Sends the lane's entries in order until none is left.
    private func drain(_ lane: String) async {
        var failures = 0
        /// The entry already sent again because credentials came back during its attempt.
        var retriedWithNewCredentials: Int64?
        while true {
            let next: (entry: OutboxEntry, payload: Data)?
            do {
                switch try await claimHead(of: lane) {
                case .claimed(let entry, let payload):
                    next = (entry, payload)
                case .empty, .blocked:
                    next = nil
                case .claimedElsewhere(let expiry):
                    // Another outbox sends the lane's first entry: nothing
                    // behind it may go first. Look again when its claim expires.
                    if await waitForClaim(until: expiry, lane: lane) { continue }
                    state.withLock { $0.running[lane] = nil }
                    return
                }
            } catch {
                next = nil
            }
            guard let next else {
                let more = state.withLock { state -> Bool in
                    if state.running[lane] == true {
                        state.running[lane] = false
                        return true
                    }
                    state.running[lane] = nil
                    return false
                }
                if more { continue }
                return
            }
            let entry = next.entry
            let key = entry.id.rawValue
            guard state.withLock({ $0.inFlight.insert(key).inserted }) else {
                // Being discarded: look again once that is done.
                await releaseClaim(key, inDatabase: true)
                await Task.yield()
                continue
            }
            await changed(key, .sending)
            let epoch = state.withLock { $0.credentialsEpoch }
            let disposition: Disposition
            if let type = types[entry.typeName], let mutation = try? Self.rebuild(type, from: next.payload) {
                disposition = await deliver(mutation, entry: entry)
            } else {
                let reason = types[entry.typeName] == nil ? "\(entry.typeName) is not registered" : "its payload cannot be decoded as \(entry.typeName)"
                disposition = await fail(entry, DepotError(.decoding, operation: entry.typeName, detail: reason), because: "it cannot be rebuilt: \(reason)")
            }
            switch disposition {
            case .decided(let step):
                failures = 0
                state.withLock { _ = $0.rebases.removeValue(forKey: key) }
                // Its settling transaction removed the row, or the claim with it.
                await releaseClaim(key, inDatabase: false)
                await changed(key, step)
            case .claimLost:
                leaveInFlight(key)
                await releaseClaim(key, inDatabase: false)
                await changed()
            case .rebased:
                failures = 0
                leaveInFlight(key)
                // Released, so that another process need not wait out the
                // claim if this lane stops before it picks the entry again.
                await releaseClaim(key, inDatabase: true)
                await changed(key, .rebased)
            case .kept:
                failures = 0
                leaveInFlight(key)
                await releaseClaim(key, inDatabase: false)
                await changed(key, .conflicted)
            case .again(let error):
                leaveInFlight(key)
                failures += 1
                // Not decided: another outbox may try it during the pause.
                let claimant = claimant
                _ = try? await store.write { db in
                    try db.execute(sql: "UPDATE \(OutboxTable.name) SET attempts = attempts + 1, lastError = ? WHERE id = ?", arguments: ["\(error)", key])
                    try db.execute(sql: Self.releaseSQL, arguments: [key, claimant])
                }
                await releaseClaim(key, inDatabase: false)
                await changed(key, .willRetry)
                // Shutting down: it stays queued for the next launch rather
                // than hold the grace through a backoff. A one-shot tool
                // stops here too, and says "queued".
                if controller.isShutDown || !waitsForNetwork || store.isClosing {
                    state.withLock { $0.running[lane] = nil }
                    return
                }
                var random = SystemRandomNumberGenerator()
                let delay = RetryPolicy.default.backoff(after: failures, using: &random)
                // A shutdown ends the pause (``wakeForShutdown()``): the
                // entry stays queued, and the grace need not wait for it.
                state.withLock { _ = $0.pausing.insert(lane) }
                let slept: Bool
                do {
                    try await controller.configuration.environment.clock.sleep(for: delay)
                    slept = true
                } catch {
                    slept = false
                }
                state.withLock { _ = $0.pausing.remove(lane) }
                if !slept {
                    state.withLock { $0.running[lane] = nil }
                    return
                }
                if controller.isShutDown {
                    state.withLock { $0.running[lane] = nil }
                    return
                }
            case .held:
                // Credentials that came back while the attempt ran were not
                // the ones refused: try again with them rather than hold.
                // Once: a 401 that new credentials do not cure (a token
                // without the scope) would otherwise loop, a refresh a turn.
                let retried = retriedWithNewCredentials == key
                let held = state.withLock { state -> Bool in
                    guard state.credentialsEpoch == epoch || retried else { return false }
                    state.held.insert(lane)
                    state.running[lane] = nil
                    return true
                }
                leaveInFlight(key)
                await releaseClaim(key, inDatabase: true)
                if !held {
                    retriedWithNewCredentials = key
                    continue
                }
                await changed(key, .held)
                return
            case .stop:
                state.withLock { state in
                    state.inFlight.remove(key)
                    state.running[lane] = nil
                }
                // Left queued: another process may send it now.
                await releaseClaim(key, inDatabase: true)
                // Nothing in this process will decide it now.
                if store.isClosing { resolve(key, .failure(Self.storeClosed), step: nil) }
                await changed()
                return
            }
        }
    }

    /// The storage problems that may pass while the app runs (space freed,
    /// another process done, permissions given back): a commit that meets
    /// one leaves its entry pending, to be sent again.
    static let passingProblems: Set<DepotError.StorageProblem> = [.diskFull, .locked, .readOnly, .noPermission]

    /// What a request that got no answer to judge decides, whatever the
    /// mutation: the claim was lost meanwhile, the outbox stops, or the
    /// network failed and the entry goes again later. `nil`: the caller decides.
    func passingDisposition(of error: DepotError, key: Int64) -> Disposition? {
        if claimWasLost(key) { return .claimLost }
        switch error.code {
        case .cancelled, .shutDown: return .stop
        case .offline, .connectionLost, .timedOut, .transport, .server: return .again(error)
        default: return nil
        }
    }

    /// One attempt for one entry, and what its answer decides.
    private func deliver<M: Mutation>(_ mutation: M, entry: OutboxEntry) async -> Disposition {
        let key = entry.id.rawValue
        let response: NetworkResponse
        do {
            response = try await attempt(mutation, entry: entry).get()
        } catch {
            if let passing = passingDisposition(of: error, key: key) { return passing }
            if error.code == .unauthorized { return .held }
            return await rollBack(mutation, key: key, error: error)
        }
        let status = response.status
        if (200..<300).contains(status) {
            do {
                let ours = try await queueWrite(pendingDelta: -1) { [types] db -> Bool in
                    // Decided by another outbox already (this one's claim
                    // expired while it waited): its decision stands.
                    guard try Self.exists(key, db) else { return false }
                    try mutation.commit(response, db)
                    try ConflictTable.delete(key, db)
                    try Self.carryForward(mutation, response: response, key: key, types: types, db)
                    try SyncLedger.invalidate(mutation.invalidates, in: db)
                    try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
                    return true
                }
                if !ours { invalidateCounts() }
            } catch {
                // The store is closing: the entry stays queued, and the next
                // launch sends it again with its key (the server answers as
                // it did the first time).
                if store.isClosing { return .stop }
                // The store could not write now (a full disk, another
                // process's lock): the transaction rolled back whole, so the
                // entry is still pending as it was. It goes again later with
                // its key, and the server answers as it did the first time:
                // the commit then happens once.
                if let problem = error.storageProblem, Self.passingProblems.contains(problem) {
                    return .again(DepotError(.storage, operation: M.typeName, status: status, detail: "the server accepted it, but its commit could not be written", underlying: error))
                }
                // The server has it, but the local rows could not take the
                // answer: stop here rather than send it again and again.
                let failure = DepotError(.processing, operation: M.typeName, status: status, detail: "commit failed", underlying: error)
                return await fail(entry, failure, because: "the server accepted it, but its commit failed: \(failure)")
            }
            resolve(key, .success(response), step: .committed)
            return .decided(.committed)
        }
        let error = mutation.error(for: response)
        // Judged first: a 409 "still processing" is never a conflict, even for
        // an edit that takes 409s as conflicts (a rebase would send it again
        // under a new key while the first request is being processed).
        if mutation.isStillProcessing(response) || status == 408 || status == 429 || status >= 500 {
            return .again(error)
        }
        if status == 401 { return .held }
        if M.self is any VersionedEdit.Type, let edit = mutation as? any VersionedEdit, let disposition = await conflictDisposition(edit, entry: entry, response: response) {
            return disposition
        }
        return await rollBack(mutation, key: key, error: error)
    }

    /// Sends `mutation` once through the controller, and tells subscribers,
    /// in order and before the answer is judged, when the attempt waits for
    /// the network (``OutboxChange/Step/waitingForNetwork``)
    /// and when it goes out again (``OutboxChange/Step/sending``).
    private func attempt<M: Mutation>(_ mutation: M, entry: OutboxEntry) async -> Result<NetworkResponse, DepotError> {
        let key = entry.id.rawValue
        let (steps, continuation) = AsyncStream.makeStream(of: OutboxChange.Step.self)
        let delivery = OutboxDelivery(
            mutation: mutation, idempotencyKey: entry.idempotencyKey, waitsForNetwork: waitsForNetwork, attemptLimit: attemptLimit,
            renewClaim: { [weak self] () async throws(DepotError) in try await self?.renewClaim(key) })
        async let answer: Result<NetworkResponse, DepotError> = {
            defer { continuation.finish() }
            do throws(DepotError) {
                // Admitted during the shutdown grace too: queued sends get it, one after another.
                return .success(try await controller.perform(delivery, admittedDuringGrace: true) { [weak self] event in
                    guard let self else { return }
                    // An offline controller's probe starts the attempt again:
                    // it is still waiting until the probe finds the network.
                    let waiting = event.kind == .waitingForNetwork
                    let going = event.kind == .progress || (event.kind == .started && controller.quality != .offline)
                    guard waiting || going else { return }
                    let changed = state.withLock { state in
                        waiting ? state.waitingForNetwork.insert(key).inserted : state.waitingForNetwork.remove(key) != nil
                    }
                    if changed { continuation.yield(waiting ? .waitingForNetwork : .sending) }
                })
            } catch {
                return .failure(error)
            }
        }()
        for await step in steps { await changed(key, step) }
        let result = await answer
        state.withLock { _ = $0.waitingForNetwork.remove(key) }
        return result
    }

    /// A permanent failure: roll back and remove, in one transaction.
    private func rollBack<M: Mutation>(_ mutation: M, key: Int64, error: DepotError) async -> Disposition {
        do {
            let ours = try await queueWrite(pendingDelta: -1) { [types] db -> Bool in
                guard try Self.exists(key, db) else { return false }
                try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
                try ConflictTable.delete(key, db)
                try mutation.rollback(error, db)
                // What else is queued is still what the user sees (a rollback
                // may have undone a field a later change set too).
                if mutation.record != nil { try OutboxTable.reapplyPending(db, types: types) }
                return true
            }
            if !ours { invalidateCounts() }
        } catch {
            if store.isClosing { return .stop }
            return .again(DepotError.wrap(error, operation: M.typeName, fallback: .storage))
        }
        noteRolledBack(key, typeName: M.typeName, error: error)
        return .decided(.rolledBack)
    }

    /// Marks an entry failed: it stays, blocks nothing, and can be retried or discarded.
    func fail(_ entry: OutboxEntry, _ error: DepotError, because reason: String) async -> Disposition {
        let key = entry.id.rawValue
        _ = try? await queueWrite(pendingDelta: nil) { db in
            try db.execute(
                sql: "UPDATE \(OutboxTable.name) SET state = 'failed', lastError = ?, claimedBy = NULL, claimPID = NULL, claimExpires = NULL WHERE id = ?",
                arguments: [reason, key])
        }
        resolve(key, .failure(error), step: .failed)
        return .decided(.failed)
    }

    /// Whether entry `key` is still in the table (no other outbox decided it).
    static func exists(_ key: Int64, _ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(OutboxTable.name) WHERE id = ?)", arguments: [key]) ?? false
    }

    /// What waiters of an entry hear when the store closes before it was decided.
    static let storeClosed = DepotError(.storage, detail: "the store closed; the entry stays queued for the next launch")

    /// Takes `key` out of the entries being sent, undecided. If the store
    /// has closed, its waiters hear so now: ``storeDidClose()`` left them to
    /// whoever was sending it, and nothing in this process will decide it.
    func leaveInFlight(_ key: Int64) {
        let waiters = state.withLock { state in
            state.inFlight.remove(key)
            return state.storeClosed ? state.waiters.removeValue(forKey: key) ?? [] : []
        }
        for waiter in waiters { waiter.resume(returning: .failure(Self.storeClosed)) }
    }

    /// The store closed: every waiter of an entry no lane is sending hears
    /// so now (a lane that is sending one settles it itself).
    func storeDidClose() {
        // Its claims can no longer be settled: other outboxes of this process may take them over.
        Self.liveClaimants.withLock { _ = $0.remove(claimant) }
        let waiters = state.withLock { state in
            state.storeClosed = true
            let idle = state.waiters.keys.filter { !state.inFlight.contains($0) }
            return idle.flatMap { state.waiters.removeValue(forKey: $0) ?? [] }
        }
        for waiter in waiters { waiter.resume(returning: .failure(Self.storeClosed)) }
    }

    /// Cancels the lanes pausing after a failure, so that they stop now
    /// rather than after their backoff; their entries stay queued.
    func wakeForShutdown() {
        let pausing = state.withLock { state in state.pausing.compactMap { state.loops[$0] } }
        for loop in pausing { loop.cancel() }
    }

    /// Hands an outcome to the entry's waiters, and keeps it with its step
    /// for late ones (unless `step` is nil: "no such entry" is not kept).
    func resolve(_ key: Int64, _ outcome: Result<NetworkResponse, DepotError>, step: OutboxChange.Step?, unlessInFlight: Bool = false) {
        let waiters = state.withLock { state -> [CheckedContinuation<Result<NetworkResponse, DepotError>, Never>] in
            if unlessInFlight, state.inFlight.contains(key) { return [] }
            state.inFlight.remove(key)
            if let step {
                state.outcomes[key] = (outcome, step)
                state.outcomeOrder.append(key)
                if state.outcomeOrder.count > Self.keptOutcomes {
                    state.outcomes[state.outcomeOrder.removeFirst()] = nil
                }
            }
            return state.waiters.removeValue(forKey: key) ?? []
        }
        for waiter in waiters { waiter.resume(returning: outcome) }
    }
}


/// One attempt to send a mutation: its request with the entry's
/// `Idempotency-Key` (and its base version as `If-Match`), accepting every status (the outbox judges the answer).
struct OutboxDelivery<M: Mutation>: NetworkOperation {
    typealias Output = NetworkResponse

    let mutation: M
    let idempotencyKey: String
    let waitsForNetwork: Bool
    /// The longest one attempt may take: it ends while its claim holds.
    let attemptLimit: Duration
    /// Renews the outbox's claim on the entry; throws if it is another's now.
    let renewClaim: @Sendable () async throws(DepotError) -> Void

    var request: NetworkRequest {
        var request = mutation.request
        request.headers["Idempotency-Key"] = idempotencyKey
        if let version = mutation.baseVersion { request.headers["If-Match"] = version.entityTag }
        return request
    }

    var name: String { M.typeName }
    var priority: Priority { mutation.priority }
    var category: OperationCategory { mutation.category }
    var timeout: Timeout {
        let timeout = mutation.timeout
        return Timeout(idle: timeout.idle, total: min(timeout.total ?? attemptLimit, attemptLimit))
    }
    /// A send in flight gets the grace at exit; what is left stays queued.
    var exitPolicy: ExitPolicy { .finish }
    var coalescing: Coalescing { .key("outbox \(idempotencyKey)") }
    /// Offline, it waits in the controller's queue and goes when the network
    /// is back (or, for a one-shot tool, fails at once and stays queued).
    var offlineBehavior: OfflineBehavior { waitsForNetwork ? .waitForConnectivity : .failFast }
    /// The key makes every method safe to repeat after a lost connection.
    var retryPolicy: RetryPolicy? {
        RetryPolicy(methods: [.get, .head, .put, .delete, .options, .post, .patch])
    }

    func validate(_ response: NetworkResponse) throws {}

    /// Right before each attempt goes out: only under this outbox's claim.
    func prepare(_ request: inout TransportRequest, context: OperationContext) async throws {
        try await renewClaim()
    }
}
