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
/// | 401 | its lane is held until ``resumeHeld()`` (new credentials) |
/// | any other status (400, 403, 404, 409, 410, 422, …) | ``Mutation/rollback(_:_:)`` and the row's removal, in one transaction |
///
/// Lanes: mutations of one ``Mutation/lane`` go strictly in order, one at a
/// time; lanes run in parallel within the controller's concurrency limit. A
/// permanent failure is rolled back and removed, so it blocks neither its own
/// lane nor the others.
///
/// For example:
///
/// ```swift
/// let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
/// try await outbox.start()                          // what earlier launches left
/// let id = try await outbox.send(SendPost(payload: .init(localID: "local-1", text: "hi")))
/// // The pending row is on screen now; later:
/// let answer = await outbox.outcome(of: id)
/// ```
///
/// At ``NetworkController/shutdown(grace:)`` sends get the grace period (their
/// exit policy is `.finish`); whatever is left stays in the store and goes
/// out on the next launch. Close the store only after ``waitUntilIdle()``.
public final class Outbox: Sendable {
    /// Where the mutations wait, and what their commits and rollbacks change.
    public let store: Store
    /// What sends them.
    public let controller: NetworkController

    private let types: [String: any Mutation.Type]
    private let state = Mutex(State())

    private struct State {
        /// Lanes a delivery loop runs for, and whether something was queued
        /// on them since the loop last looked.
        var running: [String: Bool] = [:]
        /// The delivery loops' tasks, for ``waitUntilIdle()``.
        var loops: [String: Task<Void, Never>] = [:]
        /// Lanes stopped by a 401.
        var held: Set<String> = []
        /// Entries taken by a delivery loop and not yet decided.
        var inFlight: Set<Int64> = []
        var waiters: [Int64: [CheckedContinuation<Result<NetworkResponse, DepotError>, Never>]] = [:]
        /// The latest outcomes, for a caller that asks after the fact.
        var outcomes: [Int64: Result<NetworkResponse, DepotError>] = [:]
        var outcomeOrder: [Int64] = []
        /// The latest permanent failures, for ``OutboxSnapshot/rolledBack``.
        var rolledBack: [OutboxFailure] = []
        var subscribers: [UInt64: AsyncStream<OutboxSnapshot>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
        /// Changes are numbered before their snapshot is read; a snapshot is
        /// published only if no later one was, so the last one seen is current.
        var changeCount: UInt64 = 0
        var publishedChange: UInt64 = 0
    }

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
    public init(store: Store, controller: NetworkController, types: [any Mutation.Type]) {
        self.store = store
        self.controller = controller
        let types = Dictionary(types.map { ($0.typeName, $0) }, uniquingKeysWith: { first, _ in first })
        self.types = types
        store.mutationTypes.withLock { $0.merge(types) { first, _ in first } }
    }

    // MARK: - Sending

    /// Queues `mutation` durably and applies its optimistic change, in one
    /// transaction; returns after it committed, before any network attempt.
    ///
    /// - Returns: The entry's id, for ``outcome(of:)`` and ``discard(_:)``.
    /// - Throws: `.invalidRequest` if the type is not registered; `.encoding`
    ///   if the payload cannot be encoded; `.storage` if the transaction fails
    ///   (then nothing was queued and nothing changed).
    @discardableResult
    public func send<M: Mutation>(_ mutation: M) async throws(DepotError) -> OutboxEntry.ID {
        guard types[M.typeName] != nil else {
            throw DepotError(.invalidRequest, operation: M.typeName, detail: "\(M.typeName) is not registered: pass it in Outbox(store:controller:types:)")
        }
        let payload: Data
        do {
            payload = try Self.encoder.encode(mutation.payload)
        } catch {
            throw DepotError(.encoding, operation: M.typeName, underlying: error)
        }
        let key = UUID().uuidString
        let now = store.currentDate()
        let lane = mutation.lane
        let id = try await store.write { db in
            try db.execute(
                sql: "INSERT INTO \(OutboxTable.name) (typeName, lane, payload, idempotencyKey, createdAt) VALUES (?, ?, ?, ?, ?)",
                arguments: [M.typeName, lane, payload, key, now])
            let id = db.lastInsertedRowID
            try mutation.applyOptimistically(db)
            return id
        }
        kick(lane)
        await changed()
        return OutboxEntry.ID(rawValue: id)
    }

    /// Starts delivering what is queued, such as what an earlier launch left.
    /// Call it once the app is set up; ``send(_:)`` starts its own lane.
    public func start() async throws(DepotError) {
        let lanes = try await store.read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT lane FROM \(OutboxTable.name) WHERE state = 'pending'")
        }
        for lane in lanes { kick(lane) }
    }

    /// Returns when no delivery loop runs: every lane is empty, held, or
    /// stopped because the controller shut down. Call it after
    /// ``NetworkController/shutdown(grace:)`` and before closing the store.
    public func waitUntilIdle() async {
        while let loop = state.withLock({ $0.loops.values.first }) {
            await loop.value
            state.withLock { state in
                if let key = state.loops.first(where: { $0.value == loop })?.key { state.loops[key] = nil }
            }
        }
    }

    /// Lets lanes held by a 401 go again (after new credentials).
    public func resumeHeld() {
        let lanes = state.withLock { state -> Set<String> in
            defer { state.held.removeAll() }
            return state.held
        }
        for lane in lanes { kick(lane) }
    }

    // MARK: - Status

    /// What the outbox holds now.
    public func snapshot() async throws(DepotError) -> OutboxSnapshot {
        let (pending, failed) = try await store.read { db in
            let pending = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(OutboxTable.name) WHERE state = 'pending'") ?? 0
            let failed = try Row.fetchAll(db, sql: "SELECT * FROM \(OutboxTable.name) WHERE state = 'failed' ORDER BY id").map(OutboxTable.entry)
            return (pending, failed)
        }
        let (isSending, held, rolledBack) = state.withLock { (!$0.inFlight.isEmpty, $0.held, $0.rolledBack) }
        return OutboxSnapshot(pendingCount: pending, isSending: isSending, heldLanes: held, failed: failed, rolledBack: rolledBack)
    }

    /// Every change of the outbox, starting with its state now. The sequence
    /// ends when its iterator is released.
    public func updates() -> AsyncStream<OutboxSnapshot> {
        let (stream, continuation) = AsyncStream<OutboxSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> UInt64 in
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        // Through the numbered path, so this first value cannot land after a newer one.
        Task { await self.changed() }
        return stream
    }

    /// Tells subscribers, `events` and NotificationCenter what the outbox holds now.
    private func changed() async {
        let change = state.withLock { state -> UInt64 in
            state.changeCount += 1
            return state.changeCount
        }
        guard let snapshot = try? await snapshot() else { return }
        let published = state.withLock { state -> Bool in
            guard change > state.publishedChange else { return false }
            state.publishedChange = change
            // Yielding does not block: done under the lock, so two
            // publishers cannot hand subscribers their snapshots out of order.
            for continuation in state.subscribers.values { continuation.yield(snapshot) }
            return true
        }
        if published {
            controller.publish(.outboxChanged(NetworkEvent.OutboxCounts(pending: snapshot.pendingCount, failed: snapshot.failed.count, isSending: snapshot.isSending)))
        }
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
                if let outcome = state.outcomes[key] { return outcome }
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
                self.resolve(key, .failure(DepotError(.invalidRequest, detail: "no outbox entry \(id)")), remember: false, unlessInFlight: true)
            }
        }
    }

    /// Removes a queued entry that is not being sent, rolling its optimistic
    /// change back; its waiters get `.cancelled`.
    ///
    /// - Throws: `.invalidRequest` if the entry is being sent now (its answer
    ///   decides it) or does not exist.
    public func discard(_ id: OutboxEntry.ID) async throws(DepotError) {
        let key = id.rawValue
        let taken = state.withLock { state in state.inFlight.insert(key).inserted }
        guard taken else { throw DepotError(.invalidRequest, detail: "outbox entry \(id) is being sent") }
        let error = DepotError(.cancelled, detail: "discarded")
        do throws(DepotError) {
            let found = try await store.write { [types] db -> Bool in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(OutboxTable.name) WHERE id = ?", arguments: [key]) else { return false }
                // A mutation that cannot be rebuilt has nothing to roll back with.
                if let type = types[row["typeName"]], let mutation = try? Self.rebuild(type, from: row["payload"]) {
                    try mutation.rollback(error, db)
                }
                try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
                return true
            }
            guard found else {
                state.withLock { _ = $0.inFlight.remove(key) }
                throw DepotError(.invalidRequest, detail: "no outbox entry \(id)")
            }
        } catch {
            state.withLock { _ = $0.inFlight.remove(key) }
            throw error
        }
        resolve(key, .failure(error))
        await changed()
    }

    /// Puts a failed entry back in its lane.
    public func retry(_ id: OutboxEntry.ID) async throws(DepotError) {
        let lane = try await store.write { db in
            try db.execute(sql: "UPDATE \(OutboxTable.name) SET state = 'pending' WHERE id = ?", arguments: [id.rawValue])
            return try String.fetchOne(db, sql: "SELECT lane FROM \(OutboxTable.name) WHERE id = ?", arguments: [id.rawValue])
        }
        if let lane { kick(lane) }
        await changed()
    }

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
    private func kick(_ lane: String) {
        let starts = state.withLock { state -> Bool in
            guard !state.held.contains(lane) else { return false }
            if state.running[lane] != nil {
                state.running[lane] = true
                return false
            }
            state.running[lane] = false
            return true
        }
        guard starts else { return }
        state.withLock { state in
            state.loops[lane] = Task { await self.drain(lane) }
        }
    }

    private enum Disposition {
        /// Decided (committed, rolled back or failed): next entry.
        case decided
        /// Not decided: try the same entry again after a backoff.
        case again(DepotError)
        /// 401: hold the lane.
        case held
        /// The controller is shut down or the task cancelled: leave it queued.
        case stop
    }

    /// Sends the lane's entries in order until none is left.
    private func drain(_ lane: String) async {
        var failures = 0
        while true {
            let next: (entry: OutboxEntry, payload: Data)?
            do {
                next = try await store.read { db in
                    try Row.fetchOne(db, sql: "SELECT * FROM \(OutboxTable.name) WHERE lane = ? AND state = 'pending' ORDER BY id LIMIT 1", arguments: [lane])
                        .map { (OutboxTable.entry($0), $0["payload"]) }
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
                await Task.yield()
                continue
            }
            await changed()
            let disposition: Disposition
            if let type = types[entry.typeName], let mutation = try? Self.rebuild(type, from: next.payload) {
                disposition = await deliver(mutation, entry: entry)
            } else {
                let reason = types[entry.typeName] == nil ? "\(entry.typeName) is not registered" : "its payload cannot be decoded as \(entry.typeName)"
                disposition = await fail(entry, DepotError(.decoding, operation: entry.typeName, detail: reason), because: "it cannot be rebuilt: \(reason)")
            }
            switch disposition {
            case .decided:
                failures = 0
                await changed()
            case .again(let error):
                state.withLock { _ = $0.inFlight.remove(key) }
                failures += 1
                _ = try? await store.write { db in
                    try db.execute(sql: "UPDATE \(OutboxTable.name) SET attempts = attempts + 1, lastError = ? WHERE id = ?", arguments: ["\(error)", key])
                }
                await changed()
                var random = SystemRandomNumberGenerator()
                let delay = RetryPolicy.default.backoff(after: failures, using: &random)
                do {
                    try await controller.configuration.clock.sleep(for: delay)
                } catch {
                    state.withLock { $0.running[lane] = nil }
                    return
                }
                if controller.isShutDown {
                    state.withLock { $0.running[lane] = nil }
                    return
                }
            case .held:
                state.withLock { state in
                    state.inFlight.remove(key)
                    state.held.insert(lane)
                    state.running[lane] = nil
                }
                await changed()
                return
            case .stop:
                state.withLock { state in
                    state.inFlight.remove(key)
                    state.running[lane] = nil
                }
                await changed()
                return
            }
        }
    }

    /// One attempt for one entry, and what its answer decides.
    private func deliver<M: Mutation>(_ mutation: M, entry: OutboxEntry) async -> Disposition {
        let key = entry.id.rawValue
        let response: NetworkResponse
        do {
            response = try await controller.perform(OutboxDelivery(mutation: mutation, idempotencyKey: entry.idempotencyKey))
        } catch {
            switch error.code {
            case .cancelled, .shutDown:
                return .stop
            case .offline, .connectionLost, .timedOut, .transport, .server:
                return .again(error)
            case .unauthorized:
                return .held
            default:
                return await rollBack(mutation, key: key, error: error)
            }
        }
        let status = response.status
        if (200..<300).contains(status) {
            do {
                try await store.write { db in
                    try mutation.commit(response, db)
                    try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
                }
            } catch {
                // The server has it, but the local rows could not take the
                // answer: stop here rather than send it again and again.
                let failure = DepotError(.processing, operation: M.typeName, status: status, detail: "commit failed", underlying: error)
                return await fail(entry, failure, because: "the server accepted it, but its commit failed: \(failure)")
            }
            resolve(key, .success(response))
            return .decided
        }
        let error = DepotError.forStatus(status, body: response.body, operation: M.typeName)
        if mutation.isStillProcessing(response) || status == 408 || status == 429 || status >= 500 {
            return .again(error)
        }
        if status == 401 { return .held }
        return await rollBack(mutation, key: key, error: error)
    }

    /// A permanent failure: roll back and remove, in one transaction.
    private func rollBack<M: Mutation>(_ mutation: M, key: Int64, error: DepotError) async -> Disposition {
        do {
            try await store.write { db in
                try mutation.rollback(error, db)
                try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
            }
        } catch {
            return .again(DepotError.wrap(error, operation: M.typeName, fallback: .storage))
        }
        state.withLock { state in
            state.rolledBack.append(OutboxFailure(id: OutboxEntry.ID(rawValue: key), typeName: M.typeName, error: error))
            if state.rolledBack.count > Self.keptFailures { state.rolledBack.removeFirst() }
        }
        resolve(key, .failure(error))
        return .decided
    }

    /// Marks an entry failed: it stays, blocks nothing, and can be retried or discarded.
    private func fail(_ entry: OutboxEntry, _ error: DepotError, because reason: String) async -> Disposition {
        let key = entry.id.rawValue
        _ = try? await store.write { db in
            try db.execute(sql: "UPDATE \(OutboxTable.name) SET state = 'failed', lastError = ? WHERE id = ?", arguments: [reason, key])
        }
        resolve(key, .failure(error))
        return .decided
    }

    /// Hands an outcome to the entry's waiters (and keeps it for late ones).
    private func resolve(_ key: Int64, _ outcome: Result<NetworkResponse, DepotError>, remember: Bool = true, unlessInFlight: Bool = false) {
        let waiters = state.withLock { state -> [CheckedContinuation<Result<NetworkResponse, DepotError>, Never>] in
            if unlessInFlight, state.inFlight.contains(key) { return [] }
            state.inFlight.remove(key)
            if remember {
                state.outcomes[key] = outcome
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
/// `Idempotency-Key`, accepting every status (the outbox judges the answer).
struct OutboxDelivery<M: Mutation>: NetworkOperation {
    typealias Output = NetworkResponse

    let mutation: M
    let idempotencyKey: String

    var request: NetworkRequest {
        var request = mutation.request
        request.headers["Idempotency-Key"] = idempotencyKey
        return request
    }

    var name: String { M.typeName }
    var priority: Priority { mutation.priority }
    var category: OperationCategory { mutation.category }
    var timeout: Timeout { mutation.timeout }
    /// A send in flight gets the grace at exit; what is left stays queued.
    var exitPolicy: ExitPolicy { .finish }
    var coalescing: Coalescing { .key("outbox \(idempotencyKey)") }
    /// Offline, it waits in the controller's queue and goes when the network is back.
    var offlineBehavior: OfflineBehavior { .waitForConnectivity }
    /// The key makes every method safe to repeat after a lost connection.
    var retryPolicy: RetryPolicy? {
        RetryPolicy(methods: [.get, .head, .put, .delete, .options, .post, .patch])
    }

    func validate(_ response: NetworkResponse) throws {}
}
