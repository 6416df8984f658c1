#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Depot
import Foundation
import GRDB
import Synchronization

/// Claims: one sender per entry among the outboxes (and processes) that share
/// the store file. The rules are in ``Outbox``'s documentation; the columns are
/// ``OutboxTable/claimColumns``.
extension Outbox {
    /// What a lane found first in its queue.
    enum Head {
        /// An entry, now claimed by this outbox.
        case claimed(OutboxEntry, payload: Data)
        /// The lane's first entry is another outbox's until this date.
        case claimedElsewhere(until: Date)
        /// Nothing pending.
        case empty
        /// The lane's first entry is a conflict kept for the user: nothing
        /// behind it goes until it is resolved.
        case blocked
    }

    /// This process's id, written with each claim so that another process
    /// can tell a claim whose process is gone.
    static let processID = Int64(getpid())

    /// Whether process `pid` may still exist: only "no such process" says
    /// no (a process of another user or sandbox answers "not permitted").
    static func processMayExist(_ pid: Int64?) -> Bool {
        guard let pid, let id = pid_t(exactly: pid), id > 0 else { return true }
        return kill(id, 0) == 0 || errno != ESRCH
    }

    /// The outboxes of this process whose store is open: a claim written by
    /// this process under another name is an outbox's that is gone (its store
    /// closed under a lane, say), and nothing of this process will settle it.
    static let liveClaimants = Mutex<Set<String>>([])

    /// Whether `row`'s claim keeps `claimant` from sending it at `now`: it is
    /// another's, has not expired, and its outbox may still send: the
    /// process may exist, and if it is this one, the outbox is live.
    static func isClaimedElsewhere(_ row: Row, by claimant: String, at now: Date) -> Date? {
        guard let holder: String = row["claimedBy"], holder != claimant,
              let expires: Double = row["claimExpires"], expires > now.timeIntervalSince1970
        else { return nil }
        let pid: Int64? = row["claimPID"]
        if pid == processID {
            guard liveClaimants.withLock({ $0.contains(holder) }) else { return nil }
        } else if !processMayExist(pid) {
            return nil
        }
        return Date(timeIntervalSince1970: expires)
    }

    /// How long an attempt may take: it must end while the claim it was made
    /// under holds, with time left for the transaction that settles it.
    var attemptLimit: Duration { claimDuration * 2 / 3 }

    /// Picks the lane's first pending entry and claims it, in one transaction,
    /// unless another outbox's claim holds it.
    func claimHead(of lane: String) async throws(DepotError) -> Head {
        let (claimant, now) = (claimant, store.currentDate())
        let expires = (now + claimDuration.timeInterval).timeIntervalSince1970
        let healed = Mutex(false)
        let head = try await store.write { db -> Head in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(OutboxTable.name) WHERE lane = ? AND state IN ('pending', 'conflict') ORDER BY id LIMIT 1", arguments: [lane]) else {
                return .empty
            }
            if row["state"] == OutboxEntry.State.conflict.name {
                if try ConflictTable.one(row["id"], db) != nil { return .blocked }
                // Its conflict was lost (a rebuilt store keeps the outbox, not
                // the conflicts): sent again, it meets the server's version
                // again, and the conflict is found anew.
                try db.execute(sql: "UPDATE \(OutboxTable.name) SET state = 'pending' WHERE id = ?", arguments: [row["id"]])
                healed.withLock { $0 = true }
            }
            if let until = Self.isClaimedElsewhere(row, by: claimant, at: now) { return .claimedElsewhere(until: until) }
            try db.execute(
                sql: "UPDATE \(OutboxTable.name) SET claimedBy = ?, claimPID = ?, claimExpires = ? WHERE id = ?",
                arguments: [claimant, Self.processID, expires, row["id"]])
            return .claimed(OutboxTable.entry(row), payload: row["payload"])
        }
        if case .claimed(let entry, _) = head {
            state.withLock { $0.claims[entry.id.rawValue] = now }
        }
        if healed.withLock({ $0 }) { invalidateCounts() }
        return head
    }

    /// Renews this outbox's claim on entry `key` right before an attempt
    /// sends it, unless it was written so recently that it outlasts the
    /// attempt anyway.
    ///
    /// - Throws: `.cancelled` if another outbox has taken the entry over (the
    ///   claim expired while the attempt waited), or the renewal failed: the
    ///   attempt must not go out.
    func renewClaim(_ key: Int64) async throws(DepotError) {
        let now = store.currentDate()
        let written = state.withLock { $0.claims[key] }
        // Written less than a sixth ago: it holds past this attempt's limit (two thirds) and the settling.
        if let written, now >= written, now.timeIntervalSince(written) < claimDuration.timeInterval / 6 { return }
        let (claimant, expires) = (claimant, (now + claimDuration.timeInterval).timeIntervalSince1970)
        let kept: Bool
        do {
            kept = try await store.write { db in
                try db.execute(
                    sql: "UPDATE \(OutboxTable.name) SET claimExpires = ? WHERE id = ? AND claimedBy = ? AND state = 'pending'",
                    arguments: [expires, key, claimant])
                return db.changesCount > 0
            }
        } catch {
            state.withLock { _ = $0.lostClaims.insert(key) }
            throw DepotError(.cancelled, detail: "its claim could not be renewed", underlying: error)
        }
        guard kept else {
            state.withLock { _ = $0.lostClaims.insert(key) }
            throw DepotError(.cancelled, detail: "another outbox sharing the store has taken it over")
        }
        state.withLock { $0.claims[key] = now }
    }

    /// Whether the attempt for `key` stopped because the claim was lost; forgets it.
    func claimWasLost(_ key: Int64) -> Bool {
        state.withLock { $0.lostClaims.remove(key) != nil }
    }

    /// The SQL that clears this outbox's claim on an entry (`id`, `claimedBy`).
    static let releaseSQL = "UPDATE \(OutboxTable.name) SET claimedBy = NULL, claimPID = NULL, claimExpires = NULL WHERE id = ? AND claimedBy = ?"

    /// Forgets the claim on `key` here; `inDatabase`: clears it in the store
    /// too (a settling transaction that deleted the row need not).
    func releaseClaim(_ key: Int64, inDatabase: Bool) async {
        state.withLock { state in
            state.claims[key] = nil
            state.lostClaims.remove(key)
        }
        guard inDatabase, !store.isClosing else { return }
        let claimant = claimant
        _ = try? await store.write { db in try db.execute(sql: Self.releaseSQL, arguments: [key, claimant]) }
    }

    /// Waits on the controller's clock until another outbox's claim expires
    /// (a shutdown ends the wait, like a backoff pause); `false` if it ended so.
    func waitForClaim(until expiry: Date, lane: String) async -> Bool {
        let delay = max(expiry.timeIntervalSince(store.currentDate()), 0.001)
        state.withLock { _ = $0.pausing.insert(lane) }
        defer { state.withLock { _ = $0.pausing.remove(lane) } }
        do {
            try await controller.configuration.environment.clock.sleep(for: .seconds(delay))
            return !controller.isShutDown
        } catch {
            return false
        }
    }
}

extension Duration {
    /// In seconds, as a `TimeInterval`.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
