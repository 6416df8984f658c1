import Depot
import Foundation
import GRDB

/// Conflicts: what a ``VersionedEdit``'s refused precondition becomes, and
/// how the user resolves one kept for them.
extension Outbox {
    /// How many times in a row one entry is rebased automatically, in one
    /// run, before its conflict is kept for the user: a record that changes
    /// faster than the edit can be sent (or a server that refuses every
    /// version) is not chased forever.
    public static let rebaseLimit = 5

    /// What a conflict answer to `edit` decides, or `nil` if the answer is
    /// not a conflict (``VersionedEdit/conflict(in:)``).
    ///
    /// Every write that settles it is made only while this outbox still
    /// holds the entry's claim: another process that took the entry over
    /// (the claim expired during a slow fetch of the record) decides it instead.
    func conflictDisposition<E: VersionedEdit>(_ edit: E, entry: OutboxEntry, response: NetworkResponse) async -> Disposition? {
        guard let kind = edit.conflict(in: response) else { return nil }
        let key = entry.id.rawValue
        // The answer that carried the server's record, if any.
        var carrier = response
        let theirs: ServerRecord<E.Fields>?
        switch kind {
        case .deleted:
            theirs = nil
        case .changed:
            if let record = try? edit.serverRecord(from: response) {
                theirs = record
            } else {
                switch await currentRecord(of: edit, key: key) {
                case .success(let (record, answer)):
                    theirs = record
                    carrier = answer
                case .failure(let failure):
                    if let passing = passingDisposition(of: failure.error, key: key) { return passing }
                    switch failure.kind {
                    case .signedOut:
                        // The lane waits for new credentials, and the edit
                        // goes again with them.
                        return .held
                    case .later:
                        return .again(failure.error)
                    case .final:
                        // The server's record cannot be had (its answer does
                        // not decode, or the read is refused): asking again
                        // would not change that. The entry stops, blocking
                        // nothing, with its optimistic change, for a retry or a discard.
                        return await fail(entry, failure.error, because: "the server refused it as a conflict, and its current record cannot be read: \(failure.error)")
                    }
                }
            }
        }
        let conflict = EditConflict(record: edit.record, baseVersion: edit.baseVersion, base: edit.base, mine: edit.mine, theirs: theirs)
        var decision = edit.resolve(conflict)
        let rebases = state.withLock { state -> Int in
            state.rebases[key, default: 0] += 1
            return state.rebases[key]!
        }
        if case .rebase = decision, theirs == nil || rebases > Self.rebaseLimit { decision = .keepForUser }
        let error = DepotError(
            .conflict, operation: E.typeName, status: response.status,
            detail: theirs.map { "\(edit.record.map { "\($0)" } ?? "the record") is at version \($0.version) on the server" }
                ?? "\(edit.record.map { "\($0)" } ?? "the record") was deleted on the server")
        switch decision {
        case .rebase(let fields):
            guard let theirs else { return nil }
            // Merged into exactly what the server has: nothing is left to
            // send, and the edit is done (two writers made the same change).
            if fields == theirs.fields {
                state.withLock { _ = $0.rebases.removeValue(forKey: key) }
                return await settle(edit, key: key, theirs: theirs, answer: carrier)
            }
            return await rebase(edit, entry: entry, onto: theirs, mine: fields)
        case .acceptServer:
            state.withLock { _ = $0.rebases.removeValue(forKey: key) }
            return await acceptServer(edit, key: key, theirs: theirs, error: error)
        case .keepForUser:
            state.withLock { _ = $0.rebases.removeValue(forKey: key) }
            return await keep(edit, entry: entry, theirs: theirs, error: error)
        }
    }

    /// Why the server's record could not be read, judged as delivery judges
    /// the edit's own answer: on the status itself, not on what
    /// ``Mutation/error(for:)`` makes of it.
    private struct RecordReadFailure: Error {
        enum Kind {
            /// A 401, or a sign-in refused before the read went out.
            case signedOut
            /// A 408, 429 or 5xx that the controller's retries did not get past.
            case later
            /// Any other refusal, or a record that does not decode.
            case final
        }
        var error: DepotError
        var kind: Kind
    }

    /// Reads the record as the server has it now (``VersionedEdit/currentRequest``),
    /// under the entry's claim: `nil` if it is gone (404, 410), with the answer that said so.
    private func currentRecord<E: VersionedEdit>(of edit: E, key: Int64) async -> Result<(ServerRecord<E.Fields>?, NetworkResponse), RecordReadFailure> {
        do throws(DepotError) {
            let fetch = CurrentRecordFetch(
                request: edit.currentRequest, name: "\(E.typeName) current record", priority: edit.priority, category: edit.category,
                waitsForNetwork: waitsForNetwork, attemptLimit: attemptLimit,
                renewClaim: { [weak self] () async throws(DepotError) in try await self?.renewClaim(key) })
            let response = try await controller.perform(fetch, admittedDuringGrace: true)
            if response.status == 404 || response.status == 410 { return .success((nil, response)) }
            guard (200..<300).contains(response.status) else {
                let status = response.status
                let kind: RecordReadFailure.Kind = status == 401 ? .signedOut : status == 408 || status == 429 || status >= 500 ? .later : .final
                return .failure(RecordReadFailure(error: edit.error(for: response), kind: kind))
            }
            do {
                return .success((try edit.serverRecord(from: response), response))
            } catch {
                return .failure(RecordReadFailure(error: DepotError.wrap(error, operation: E.typeName, fallback: .decoding), kind: .final))
            }
        } catch {
            return .failure(RecordReadFailure(error: error, kind: error.code == .unauthorized ? .signedOut : .final))
        }
    }

    /// Whether this outbox holds entry `key`'s claim, in the transaction `db`:
    /// what every write that settles a conflict checks first.
    func holdsClaim(_ key: Int64, _ db: Database) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(OutboxTable.name) WHERE id = ? AND claimedBy = ? AND state = 'pending')", arguments: [key, claimant]) ?? false
    }

    /// Stores `edit` made again on the server's version, with a new
    /// idempotency key, and shows it at once: the server's record with every
    /// queued change on top. The lane sends it next.
    private func rebase<E: VersionedEdit>(_ edit: E, entry: OutboxEntry, onto theirs: ServerRecord<E.Fields>, mine: E.Fields) async -> Disposition {
        let key = entry.id.rawValue
        let rebased = edit.rebased(onto: theirs.version, base: theirs.fields, mine: mine)
        let payload: Data
        do {
            payload = try Self.encoder.encode(rebased.payload)
        } catch {
            return await fail(entry, DepotError(.encoding, operation: E.typeName, underlying: error), because: "its rebased payload cannot be encoded")
        }
        if let other = await underClaim(of: key, E.self, pendingDelta: 0, { [types] db in
            try Self.storeRebased(payload, key: key, note: "rebased on version \(theirs.version) after a conflict", db)
            try edit.write(theirs, db)
            try OutboxTable.reapplyPending(db, types: types)
        }) { return other }
        return .rebased
    }

    /// Runs `updates` in one write of the queue, if this outbox still holds
    /// entry `key`'s claim. Returns `nil` once they are written; otherwise
    /// what the lane does instead: look again (another outbox took the entry
    /// over), stop (the store is closing), or try later.
    private func underClaim<E: VersionedEdit>(of key: Int64, _ type: E.Type, pendingDelta: Int?, _ updates: @escaping @Sendable (Database) throws -> Void) async -> Disposition? {
        do {
            let ours = try await queueWrite(pendingDelta: pendingDelta) { db -> Bool in
                guard try self.holdsClaim(key, db) else { return false }
                try updates(db)
                return true
            }
            guard ours else {
                // The count moved by `pendingDelta` though nothing was written.
                invalidateCounts()
                return .claimLost
            }
            return nil
        } catch {
            if store.isClosing { return .stop }
            return .again(DepotError.wrap(error, operation: E.typeName, fallback: .storage))
        }
    }

    /// An edit whose merge is what the server has already: the server's
    /// record is written, the entry removed, and its ticket gets the answer
    /// that carried the record, as a success.
    private func settle<E: VersionedEdit>(_ edit: E, key: Int64, theirs: ServerRecord<E.Fields>, answer: NetworkResponse) async -> Disposition {
        if let other = await underClaim(of: key, E.self, pendingDelta: -1, { [types] db in
            try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
            try ConflictTable.delete(key, db)
            try edit.write(theirs, db)
            try OutboxTable.reapplyPending(db, types: types)
        }) { return other }
        resolve(key, .success(NetworkResponse(status: 200, headers: answer.headers, body: answer.body, url: answer.url)), step: .committed)
        return .decided(.committed)
    }

    /// Replaces entry `key`'s payload with a rebased one, under a new
    /// idempotency key (the old one named another request), pending again.
    static func storeRebased(_ payload: Data, key: Int64, note: String, _ db: Database) throws {
        try db.execute(
            sql: "UPDATE \(OutboxTable.name) SET payload = ?, idempotencyKey = ?, state = 'pending', attempts = 0, lastError = ? WHERE id = ?",
            arguments: [payload, UUID().uuidString, note, key])
        try ConflictTable.delete(key, db)
    }

    /// Gives the edit up: its optimistic change undone, the server's record
    /// written, the entry removed, in one transaction.
    private func acceptServer<E: VersionedEdit>(_ edit: E, key: Int64, theirs: ServerRecord<E.Fields>?, error: DepotError) async -> Disposition {
        if let other = await underClaim(of: key, E.self, pendingDelta: -1, { [types] db in
            try Self.giveUp(edit, key: key, theirs: theirs, error: error, types: types, db)
        }) { return other }
        noteRolledBack(key, typeName: E.typeName, error: error)
        return .decided(.rolledBack)
    }

    /// Rolls `edit` back, writes the server's record, removes the entry and
    /// its conflict, and applies what else is queued on top again.
    static func giveUp<E: VersionedEdit>(_ edit: E, key: Int64, theirs: ServerRecord<E.Fields>?, error: DepotError, types: [String: any Mutation.Type], _ db: Database) throws {
        try db.execute(sql: "DELETE FROM \(OutboxTable.name) WHERE id = ?", arguments: [key])
        try ConflictTable.delete(key, db)
        try edit.rollback(error, db)
        try edit.write(theirs, db)
        try OutboxTable.reapplyPending(db, types: types)
    }

    /// Keeps the conflict for the user: the entry stays, in state
    /// `conflict`, with base, mine and theirs; its lane waits.
    private func keep<E: VersionedEdit>(_ edit: E, entry: OutboxEntry, theirs: ServerRecord<E.Fields>?, error: DepotError) async -> Disposition {
        let key = entry.id.rawValue
        let fields: [FieldConflict]
        if let theirs, case .conflicting(let conflicting)? = try? FieldMerge.merge(base: edit.base, mine: edit.mine, theirs: theirs.fields) {
            fields = conflicting
        } else {
            fields = (try? FieldMerge.changes(base: edit.base, mine: edit.mine, theirs: theirs?.fields)) ?? []
        }
        let conflict: OutboxConflict
        do {
            let encoder = JSONEncoder()
            conflict = OutboxConflict(
                id: entry.id, typeName: E.typeName, record: edit.record, fields: fields, theirVersion: theirs?.version, createdAt: store.currentDate(),
                base: try encoder.encode(edit.base), mine: try encoder.encode(edit.mine), theirs: try theirs.map { try encoder.encode($0.fields) })
        } catch {
            return await fail(entry, DepotError(.encoding, operation: E.typeName, underlying: error), because: "its conflict cannot be encoded")
        }
        if let other = await underClaim(of: key, E.self, pendingDelta: nil, { db in
            try db.execute(
                sql: "UPDATE \(OutboxTable.name) SET state = 'conflict', lastError = ?, claimedBy = NULL, claimPID = NULL, claimExpires = NULL WHERE id = ?",
                arguments: ["\(error)", key])
            try ConflictTable.insert(conflict, db)
        }) { return other }
        return .kept
    }

    /// Keeps a rolled-back mutation for ``OutboxSnapshot/rolledBack``, and tells its waiters.
    func noteRolledBack(_ key: Int64, typeName: String, error: DepotError) {
        state.withLock { state in
            state.rolledBack.append(OutboxFailure(id: OutboxEntry.ID(rawValue: key), typeName: typeName, error: error))
            if state.rolledBack.count > Self.keptFailures { state.rolledBack.removeFirst() }
        }
        resolve(key, .failure(error), step: .rolledBack)
    }

    /// After `mutation` (a ``VersionedEdit``) committed, the entries queued
    /// behind it in its lane for the same record that were based on exactly
    /// the fields the server now has are based on the version its answer
    /// gives: the user's own earlier change is not another writer's. (One
    /// whose base differs, because the committed edit was merged on the way,
    /// is left to meet the server's version and merge in turn.) Inside the
    /// commit's transaction.
    static func carryForward<M: Mutation>(_ mutation: M, response: NetworkResponse, key: Int64, types: [String: any Mutation.Type], _ db: Database) throws {
        guard M.self is any VersionedEdit.Type, let record = mutation.record,
              let edit = mutation as? any VersionedEdit, let (new, fields) = committed(edit, in: response)
        else { return }
        let rows = try Row.fetchAll(
            db, sql: "SELECT id, typeName, payload FROM \(OutboxTable.name) WHERE lane = ? AND recordKind = ? AND recordID = ? AND id > ? AND state = 'pending' ORDER BY id",
            arguments: [mutation.lane, record.kind, record.id, key])
        for row in rows {
            guard let type = types[row["typeName"]], let follower = try? rebuild(type, from: row["payload"]) as? any VersionedEdit,
                  follower.baseVersion != new, let payload = rebasedPayload(follower, onto: new, ifBasedOn: fields)
            else { continue }
            try db.execute(sql: "UPDATE \(OutboxTable.name) SET payload = ? WHERE id = ?", arguments: [payload, row["id"]])
        }
    }

    /// The version and fields of the record in `edit`'s successful answer, if it carries them.
    private static func committed<E: VersionedEdit>(_ edit: E, in response: NetworkResponse) -> (RecordVersion, any Sendable)? {
        guard let record = try? edit.serverRecord(from: response) else { return nil }
        return (record.version, record.fields)
    }

    /// `edit`'s payload, made again on `version` with its own base and
    /// fields, if its base is `fields`; otherwise `nil`.
    private static func rebasedPayload<E: VersionedEdit>(_ edit: E, onto version: RecordVersion, ifBasedOn fields: any Sendable) -> Data? {
        guard let fields = fields as? E.Fields, fields == edit.base else { return nil }
        return try? encoder.encode(edit.rebased(onto: version, base: edit.base, mine: edit.mine).payload)
    }

    // MARK: - Kept conflicts

    /// The conflicts kept for the user, oldest first.
    public func conflicts() async throws(DepotError) -> [OutboxConflict] {
        try await store.read { db in try ConflictTable.all(db) }
    }

    /// Resolves a kept conflict by keeping one side:
    /// - ``ConflictSide/mine``: the edit is sent again on the server's
    ///   version, with the user's values for every field it changed and the
    ///   server's for the others (``OutboxConflict/keepingMine(as:)``); not
    ///   possible for a record deleted on the server.
    /// - ``ConflictSide/theirs``: the edit is given up, its optimistic change
    ///   undone and the server's record written; its ticket ends with `.conflict`.
    ///
    /// Either way the lane goes on.
    ///
    /// - Throws: `.invalidRequest` if entry `id` has no kept conflict, its
    ///   type is not registered, or it keeps mine of a deleted record.
    public func resolveConflict(_ id: OutboxEntry.ID, keeping side: ConflictSide) async throws(DepotError) {
        try await resolveKept(id, side == .mine ? .keepMine : .keepTheirs)
    }

    /// Resolves a kept conflict with values the user chose: the edit is sent
    /// again with `fields` on the server's version. Start from
    /// ``OutboxConflict/keepingMine(as:)`` (or the server's side) and change
    /// what the user chose, so that other writers' changes are kept.
    ///
    /// - Throws: `.invalidRequest` if entry `id` has no kept conflict, if
    ///   `fields` is not the edit's ``VersionedEdit/Fields`` type, or if the
    ///   record was deleted on the server.
    public func resolveConflict<Fields: Codable & Sendable & Equatable>(_ id: OutboxEntry.ID, with fields: Fields) async throws(DepotError) {
        try await resolveKept(id, .use(fields))
    }

    /// Resolves conflict `id` as `choose` says, in one transaction; the lane then goes on.
    private func resolveKept(_ id: OutboxEntry.ID, _ choice: ResolutionChoice) async throws(DepotError) {
        let key = id.rawValue
        guard state.withLock({ $0.inFlight.insert(key).inserted }) else {
            throw DepotError(.invalidRequest, detail: "outbox entry \(id) is being sent")
        }
        let outcome: (lane: String, step: OutboxChange.Step, error: DepotError?, typeName: String)
        do throws(DepotError) {
            outcome = try await queueWrite(pendingDelta: nil) { [types] db in
                guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(OutboxTable.name) WHERE id = ? AND state = 'conflict'", arguments: [key]),
                      let conflict = try ConflictTable.one(key, db)
                else { throw DepotError(.invalidRequest, detail: "outbox entry \(id) has no conflict to resolve") }
                let typeName: String = row["typeName"]
                guard let type = types[typeName], let mutation = try? Self.rebuild(type, from: row["payload"]), let edit = mutation as? any VersionedEdit else {
                    throw DepotError(.invalidRequest, operation: typeName, detail: "\(typeName) is not a registered VersionedEdit")
                }
                let (step, error) = try Self.settle(edit, key: key, conflict: conflict, choice: choice, types: types, db)
                return (row["lane"], step, error, typeName)
            }
        } catch {
            leaveInFlight(key)
            throw error
        }
        state.withLock { _ = $0.rebases.removeValue(forKey: key) }
        if let error = outcome.error {
            noteRolledBack(key, typeName: outcome.typeName, error: error)
        } else {
            leaveInFlight(key)
        }
        await changed(key, outcome.step)
        kick(outcome.lane)
    }

    /// Carries out a resolution inside its transaction.
    private static func settle<E: VersionedEdit>(_ edit: E, key: Int64, conflict: OutboxConflict, choice: ResolutionChoice, types: [String: any Mutation.Type], _ db: Database) throws -> (OutboxChange.Step, DepotError?) {
        let sides = try conflict.sides(as: E.Fields.self)
        let theirs = sides.theirs.flatMap { fields in conflict.theirVersion.map { ServerRecord(version: $0, fields: fields) } }
        let mine: E.Fields
        switch choice {
        case .keepTheirs:
            let error = DepotError(.conflict, operation: E.typeName, detail: "the server's version was kept")
            try giveUp(edit, key: key, theirs: theirs, error: error, types: types, db)
            return (.rolledBack, error)
        case .keepMine:
            mine = try conflict.keepingMine(as: E.Fields.self)
        case .use(let fields):
            guard let fields = fields as? E.Fields else {
                throw DepotError(.invalidRequest, operation: E.typeName, detail: "conflict \(conflict.id) is resolved with \(E.Fields.self), not \(type(of: fields))")
            }
            mine = fields
        }
        guard let theirs else {
            throw DepotError(.invalidRequest, operation: E.typeName, detail: "\(conflict.record.map { "\($0)" } ?? "the record") was deleted on the server: only keeping theirs resolves conflict \(conflict.id)")
        }
        let rebased = edit.rebased(onto: theirs.version, base: theirs.fields, mine: mine)
        try storeRebased(try encoder.encode(rebased.payload), key: key, note: "rebased on version \(theirs.version) by the user", db)
        try edit.write(theirs, db)
        try OutboxTable.reapplyPending(db, types: types)
        return (.rebased, nil)
    }
}

/// What a resolution of a kept conflict does, whatever the edit's type.
enum ResolutionChoice: Sendable {
    /// Send the edit's own fields again on the server's version.
    case keepMine
    /// Keep the server's record.
    case keepTheirs
    /// Send these fields (the edit's `Fields`) on the server's version.
    case use(any Sendable)
}

/// Reads a record as the server has it now, for a conflict whose answer did
/// not carry it: every status is an answer.
/// Like a delivery, it goes only under the entry's claim, and ends while the claim holds.
struct CurrentRecordFetch: NetworkOperation {
    typealias Output = NetworkResponse
    let request: NetworkRequest
    let name: String
    let priority: Priority
    let category: OperationCategory
    let waitsForNetwork: Bool
    let attemptLimit: Duration
    /// Renews the outbox's claim on the entry; throws if it is another's now.
    let renewClaim: @Sendable () async throws(DepotError) -> Void

    var exitPolicy: ExitPolicy { .finish }
    var offlineBehavior: OfflineBehavior { waitsForNetwork ? .waitForConnectivity : .failFast }
    var timeout: Timeout { Timeout(idle: Timeout.default.idle, total: attemptLimit) }
    func validate(_ response: NetworkResponse) throws {}

    /// Right before each attempt goes out: only under the outbox's claim.
    func prepare(_ request: inout TransportRequest, context: OperationContext) async throws {
        try await renewClaim()
    }
}
