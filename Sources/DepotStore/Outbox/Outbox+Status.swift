import Depot
import Foundation
import GRDB
import Synchronization

/// Snapshots of the outbox for `OutboxStatus`, `events` and notifications.
extension Outbox {
    // MARK: - Status

    /// What the outbox holds now.
    ///
    /// The counts are kept in memory as this outbox changes the queue, so a
    /// snapshot usually reads no database; ``start()`` counts again.
    public func snapshot() async throws(DepotError) -> OutboxSnapshot {
        let (known, generation, busy) = state.withLock { ($0.counted, $0.countGeneration, $0.countChanges > 0) }
        let counts: (pending: Int, failed: [OutboxEntry], conflicts: [OutboxConflict])
        if let known {
            counts = known
        } else {
            counts = try await store.read { db in
                let pending = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(OutboxTable.name) WHERE state = 'pending'") ?? 0
                let failed = try Row.fetchAll(db, sql: "SELECT * FROM \(OutboxTable.name) WHERE state = 'failed' ORDER BY id").map(OutboxTable.entry)
                return (pending, failed, try ConflictTable.all(db))
            }
            state.withLock { state in
                if !busy, state.countChanges == 0, state.countGeneration == generation { state.counted = counts }
            }
        }
        let (isSending, isWaiting, held, rolledBack) = state.withLock { state in
            (!state.inFlight.isSubset(of: state.waitingForNetwork), !state.waitingForNetwork.isEmpty, state.held, state.rolledBack)
        }
        return OutboxSnapshot(
            pendingCount: counts.pending, isSending: isSending, isWaitingForNetwork: isWaiting, heldLanes: held, failed: counts.failed, rolledBack: rolledBack,
            conflicts: counts.conflicts)
    }

    /// A write that changes the queue; the kept counts follow it: on
    /// success pending changes by `pendingDelta` (`nil`: count again).
    func queueWrite<T: Sendable>(pendingDelta: Int?, _ updates: @escaping @Sendable (Database) throws -> T) async throws(DepotError) -> T {
        state.withLock { $0.countChanges += 1 }
        let value: T
        do {
            value = try await store.write(updates)
        } catch {
            endQueueWrite(pendingDelta: 0)  // rolled back: nothing changed
            throw error
        }
        endQueueWrite(pendingDelta: pendingDelta)
        return value
    }

    private func endQueueWrite(pendingDelta: Int?) {
        state.withLock { state in
            state.countChanges -= 1
            state.countGeneration += 1
            if let pendingDelta, state.counted != nil {
                state.counted!.pending += pendingDelta
            } else {
                state.counted = nil
            }
        }
    }

    /// The counts are read again at the next snapshot.
    func invalidateCounts() {
        state.withLock { state in
            state.counted = nil
            state.countGeneration += 1
        }
    }

    /// Every change of the outbox, starting with its state now. The sequence
    /// ends when its iterator is released.
    public func updates() -> OutboxUpdates {
        let stream = subscribe(\.subscribers, buffering: .bufferingNewest(1))
        // Through the numbered path, so this first value cannot land after a newer one.
        Task { await self.changed() }
        return DepotStream(stream)
    }

    /// A stream whose continuation is kept in `subscribers` until its iterator goes.
    private func subscribe<Element: Sendable>(
        _ subscribers: WritableKeyPath<State, [UInt64: AsyncStream<Element>.Continuation]> & Sendable,
        buffering: AsyncStream<Element>.Continuation.BufferingPolicy
    ) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: buffering)
        let id = state.withLock { state -> UInt64 in
            state.nextSubscriber += 1
            state[keyPath: subscribers][state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0[keyPath: subscribers].removeValue(forKey: id) }
        }
        return stream
    }

    /// Every change of this outbox from now on: each entry's steps and the
    /// queue's counts after them (see ``OutboxChange``). The sequence ends
    /// when its iterator is released; a subscriber that falls more than 4096
    /// changes behind loses the oldest.
    ///
    /// ```swift
    /// for await change in outbox.changes() where change.step == .rolledBack {
    ///     showUndoneBanner(for: change.entry)
    /// }
    /// ```
    public func changes() -> OutboxChanges {
        DepotStream(subscribe(\.changeSubscribers, buffering: .bufferingNewest(4096)))
    }

    /// Ends every ``changes()`` sequence (the controller shut down).
    func finishChanges() {
        let subscribers = state.withLock { state in
            defer { state.changeSubscribers.removeAll() }
            return Array(state.changeSubscribers.values)
        }
        for continuation in subscribers { continuation.finish() }
    }

    /// Tells subscribers, ``changes()``, metrics and NotificationCenter what
    /// happened to `entry` and what the outbox holds now.
    ///
    /// Every entry step becomes an event; a snapshot reaches subscribers only
    /// if no later one did, so the last one they see is current.
    func changed(_ entry: Int64? = nil, _ step: OutboxChange.Step? = nil) async {
        let change = state.withLock { state -> UInt64 in
            state.changeCount += 1
            return state.changeCount
        }
        guard let snapshot = try? await snapshot() else { return }
        let outboxChange = OutboxChange(
            entry: entry, step: step,
            pending: snapshot.pendingCount, failed: snapshot.failed.count, conflicts: snapshot.conflicts.count, isSending: snapshot.isSending,
            isWaitingForNetwork: snapshot.isWaitingForNetwork)
        let latest = state.withLock { state -> Bool in
            let latest = change > state.publishedChange
            if latest {
                state.publishedChange = change
                // Yielding does not block: done under the lock, so two
                // publishers cannot hand subscribers their snapshots out of order.
                for continuation in state.subscribers.values { continuation.yield(snapshot) }
            }
            if latest || entry != nil {
                for continuation in state.changeSubscribers.values { continuation.yield(outboxChange) }
            }
            return latest
        }
        guard latest || entry != nil else { return }
        pendingGauge?.record(outboxChange.pending)
        controller.configuration.observability.notificationCenter?.post(
            name: .depotOutboxChanged, object: controller, userInfo: [OutboxChange.UserInfoKey.change: outboxChange])
    }
}
