import Depot
import Foundation

/// A change in an outbox: what happened to which entry, and the queue's
/// counts after it. ``Outbox/changes()`` delivers every one, an
/// ``OutboxTicket``'s ``OutboxTicket/changes()`` those of its entry, and each
/// is posted as a ``Foundation/Notification/Name/depotOutboxChanged`` notification.
public struct OutboxChange: Sendable, Hashable, CustomStringConvertible {
    /// What happened to an entry. A struct of static members, like ``/Depot/NetworkEvent/Kind``.
    public struct Step: Hashable, Sendable, CustomStringConvertible {
        let name: String
        /// Stored with its optimistic change; waiting to be sent.
        public static let queued = Step(name: "queued")
        /// An attempt is under way.
        public static let sending = Step(name: "sending")
        /// Its attempt waits for the network (the controller is offline);
        /// it goes out, as ``sending``, once the network is back.
        public static let waitingForNetwork = Step(name: "waitingForNetwork")
        /// The attempt reached no final answer (offline, 5xx, 408, 429,
        /// still processing); it stays queued and is tried again.
        public static let willRetry = Step(name: "willRetry")
        /// The server accepted it; committed and removed. Final.
        public static let committed = Step(name: "committed")
        /// The server refused it for good; rolled back and removed. Final.
        public static let rolledBack = Step(name: "rolledBack")
        /// Stopped: it cannot be rebuilt or its commit failed; it waits for a retry or a discard.
        public static let failed = Step(name: "failed")
        /// A 401 holds its lane until new credentials.
        public static let held = Step(name: "held")
        /// Put back in its lane by a retry.
        public static let requeued = Step(name: "requeued")
        /// Removed by the app (rolled back). Final.
        public static let discarded = Step(name: "discarded")
        /// It met another writer's change: kept for the user, with both
        /// sides (``Outbox/conflicts()``); its lane waits until it is resolved.
        public static let conflicted = Step(name: "conflicted")
        /// It met another writer's change: made again on the server's
        /// version (merged automatically, or as the user resolved a kept
        /// conflict) and sent again.
        public static let rebased = Step(name: "rebased")

        /// Whether the entry is gone: committed, rolled back or discarded.
        public var isFinal: Bool { self == .committed || self == .rolledBack || self == .discarded }
        public var description: String { name }
    }

    /// The entry's row id, or `nil` for a change of the whole outbox
    /// (a subscription's first state, lanes resumed).
    public var entry: Int64?
    /// What happened to ``entry``.
    public var step: Step?
    /// Mutations queued and not yet decided, after the change.
    public var pending: Int
    /// Mutations stopped with an error that wait for the app (retry or discard).
    public var failed: Int
    /// Conflicts kept for the user (``Outbox/conflicts()``).
    public var conflicts: Int
    /// Whether one is being sent now (not counting those that wait for the network).
    public var isSending: Bool
    /// Whether one waits for the network to come back.
    public var isWaitingForNetwork: Bool

    /// Makes a change (DepotStore's outbox does).
    public init(entry: Int64?, step: Step?, pending: Int, failed: Int, conflicts: Int = 0, isSending: Bool, isWaitingForNetwork: Bool = false) {
        self.entry = entry
        self.step = step
        self.pending = pending
        self.failed = failed
        self.conflicts = conflicts
        self.isSending = isSending
        self.isWaitingForNetwork = isWaitingForNetwork
    }

    public var description: String {
        let what = entry.map { "#\($0) \(step.map(\.description) ?? "changed")" } ?? "outbox"
        let doing = isSending ? ", sending" : isWaitingForNetwork ? ", waiting for network" : ""
        let kept = conflicts > 0 ? ", \(conflicts) in conflict" : ""
        return "\(what): \(pending) pending, \(failed) failed\(kept)\(doing)"
    }
}

extension Notification.Name {
    /// An outbox's queue changed (mutations queued, sent, committed, rolled
    /// back). Posted on the controller's notification center with the
    /// controller as its object; the userInfo's ``OutboxChange/UserInfoKey/change``
    /// is the ``OutboxChange``.
    public static let depotOutboxChanged = Notification.Name("DepotOutboxChanged")
}

extension OutboxChange {
    /// Keys of the userInfo of a ``Foundation/Notification/Name/depotOutboxChanged`` notification.
    public enum UserInfoKey {
        /// The ``OutboxChange``.
        public static let change = "change"
    }
}
