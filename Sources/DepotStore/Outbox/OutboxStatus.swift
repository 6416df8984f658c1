import Depot
import Foundation
import Observation

/// A mutation the outbox rolled back after a permanent failure (a 422, say).
public struct OutboxFailure: Sendable, Identifiable {
    /// The entry it was.
    public var id: OutboxEntry.ID
    /// The mutation type's ``Mutation/typeName``.
    public var typeName: String
    /// Why: the server's status and body excerpt are in it.
    public var error: DepotError

    /// One sentence a person can read, such as
    /// "SendPost.v1 was not accepted: server answered 422 …".
    public var description: String { "\(typeName) was not accepted: \(error)" }
}

/// An outbox's snapshots: what it holds when ``Outbox/updates()`` was
/// called, then after each change (the latest when changes come fast).
public typealias OutboxUpdates = DepotStream<OutboxSnapshot>

/// One entry's steps, from ``OutboxTicket/changes()``.
public typealias OutboxChanges = DepotStream<OutboxChange>

/// What an outbox holds now.
public struct OutboxSnapshot: Sendable {
    /// Mutations queued and not yet decided, not counting the ``conflicts``
    /// that wait for the user (``RecordState/hasPendingWrites`` counts every
    /// entry of a record: queued, failed or in conflict).
    public var pendingCount: Int
    /// Whether one is being sent now. An entry whose attempt waits for the
    /// network does not count: see ``isWaitingForNetwork``.
    public var isSending: Bool
    /// Whether an entry's attempt waits for the network to come back.
    public var isWaitingForNetwork: Bool
    /// Lanes stopped by a 401. They go again by themselves when credentials
    /// come back (a ``/Depot/TokenAuthenticator`` sign-in or refresh), or on
    /// ``Outbox/resumeHeld()``: "sign in to send".
    public var heldLanes: Set<String>
    /// Entries stopped with an error that wait for ``Outbox/retry(_:)`` or
    /// ``Outbox/discard(_:)`` (a type no longer registered, a commit that failed).
    public var failed: [OutboxEntry]
    /// The latest mutations rolled back after a permanent failure, oldest first.
    public var rolledBack: [OutboxFailure]
    /// The conflicts kept for the user, oldest first: each holds back its
    /// lane until ``Outbox/resolveConflict(_:keeping:)`` or ``Outbox/resolveConflict(_:with:)``.
    public var conflicts: [OutboxConflict] = []
}

/// An outbox's state on the main actor, for a status line or a badge:
/// "2 posts waiting", "sending…", "not accepted: …".
///
/// For example:
///
/// ```swift
/// let status = OutboxStatus(outbox: outbox)
/// if status.pendingCount > 0 { badge.text = "\(status.pendingCount) waiting" }
/// ```
@MainActor
@Observable
public final class OutboxStatus {
    /// Mutations queued and not yet decided.
    public private(set) var pendingCount = 0
    /// Whether one is being sent now (not while it waits for the network).
    public private(set) var isSending = false
    /// Whether an entry waits for the network: "waiting for network".
    public private(set) var isWaitingForNetwork = false
    /// Lanes stopped by a 401 until new credentials are in.
    public private(set) var heldLanes: Set<String> = []
    /// Entries waiting for the app to retry or discard them.
    public private(set) var failed: [OutboxEntry] = []
    /// The latest mutations rolled back after a permanent failure.
    public private(set) var rolledBack: [OutboxFailure] = []
    /// The conflicts kept for the user (``OutboxSnapshot/conflicts``).
    public private(set) var conflicts: [OutboxConflict] = []

    @ObservationIgnored private var task: Task<Void, Never>?

    /// Starts following `outbox` until the status is released. Its counts
    /// arrive a moment later, on the main actor; in async code the
    /// `async` initializer has them at once.
    public convenience init(outbox: Outbox) {
        self.init(outbox: outbox, now: nil)
    }

    private init(outbox: Outbox, now: OutboxSnapshot?) {
        let updates = outbox.updates()
        if let now { apply(now) }
        task = Task { [weak self] in
            for await snapshot in updates {
                guard let self else { return }
                self.apply(snapshot)
            }
        }
    }

    /// Starts following `outbox`, with its state as it is now: what earlier
    /// launches left queued counts from the first frame.
    ///
    /// For example, at launch:
    ///
    /// ```swift
    /// try await outbox.start()
    /// let status = await OutboxStatus(outbox: outbox)   // "1 waiting" at once
    /// ```
    public convenience init(outbox: Outbox) async {
        let now = try? await outbox.snapshot()
        self.init(outbox: outbox, now: now)
    }

    isolated deinit {
        task?.cancel()
    }

    private func apply(_ snapshot: OutboxSnapshot) {
        if pendingCount != snapshot.pendingCount { pendingCount = snapshot.pendingCount }
        if isSending != snapshot.isSending { isSending = snapshot.isSending }
        if isWaitingForNetwork != snapshot.isWaitingForNetwork { isWaitingForNetwork = snapshot.isWaitingForNetwork }
        if heldLanes != snapshot.heldLanes { heldLanes = snapshot.heldLanes }
        if failed != snapshot.failed { failed = snapshot.failed }
        if rolledBack.map(\.id) != snapshot.rolledBack.map(\.id) { rolledBack = snapshot.rolledBack }
        if conflicts != snapshot.conflicts { conflicts = snapshot.conflicts }
    }
}
