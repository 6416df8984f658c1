import Foundation

/// Something that happened to an operation, as seen by the ``NetworkController``.
///
/// Read them from ``NetworkController/events`` or observe the matching
/// notifications (see `Notification.Name.depotOperationFinished` and friends).
///
/// ```swift
/// for await event in controller.events {
///     if case .failed(let error) = event.kind { print(event.operation, error) }
/// }
/// ```
///
/// New kinds will be added over time; switch with a `default` clause.
public struct NetworkEvent: Sendable, CustomStringConvertible {
    /// What happened.
    public enum Kind: Sendable {
        /// The operation joined the queue.
        case enqueued(priority: Priority, category: OperationCategory)
        /// Its transfer started (attempt 1, 2, ...).
        case started(attempt: Int)
        /// Body bytes arrived.
        case progress(TransferProgress)
        /// It shares the transfer of another ticket instead of making its own.
        case coalesced(into: Ticket.ID)
        /// Its queued job now runs at a higher priority because a more urgent caller joined.
        case promoted(from: Priority, to: Priority)
        /// An attempt failed and another will follow after `delay`.
        case retried(attempt: Int, delay: Duration, error: DepotError)
        /// It succeeded.
        case finished(Finished)
        /// It failed.
        case failed(DepotError)
        /// It was cancelled.
        case cancelled
        /// The transfer found no network; the operation waits in the queue for it
        /// (``OfflineBehavior/waitForConnectivity``).
        case waitingForNetwork(DepotError)
        /// Controller-wide: the connection quality changed.
        case qualityChanged(from: ConnectionQuality, to: ConnectionQuality)
        /// Controller-wide: the concurrency limit changed (policy, offline, probe).
        case concurrencyChanged(limit: Int)
        /// Controller-wide: a quality rule paused a category.
        case categoryPaused(OperationCategory)
        /// Controller-wide: a quality rule resumed a category.
        case categoryResumed(OperationCategory)
        /// Controller-wide: offline, the controller lets one queued operation try the network.
        case probing(attempt: Int)
    }

    /// Measurements of a successful operation.
    public struct Finished: Sendable, Hashable {
        /// The final HTTP status.
        public var status: Int
        /// Body bytes received.
        public var bytes: Int64
        /// From enqueue to finish.
        public var duration: Duration
        /// The transfer's own measurements, when there was a transfer.
        public var sample: TransferSample?
    }

    /// When it happened, on the controller's clock, measured from the controller's creation.
    public var time: Duration
    /// The ticket it is about.
    public var ticket: Ticket.ID
    /// The operation's name.
    public var operation: String
    /// What happened.
    public var kind: Kind

    public var description: String {
        "[\(time.milliseconds) ms] \(operation) \(ticket) \(kind)"
    }

    /// Whether this is about the controller rather than one ticket (quality,
    /// limit, rules, probes). Such events have ticket 0 and an empty operation name.
    public var isControllerWide: Bool {
        switch kind {
        case .qualityChanged, .concurrencyChanged, .categoryPaused, .categoryResumed, .probing: true
        default: false
        }
    }

    /// The notification name this event is posted under.
    public var notificationName: Notification.Name {
        switch kind {
        case .enqueued: return .depotOperationEnqueued
        case .started: return .depotOperationStarted
        case .progress: return .depotOperationProgress
        case .coalesced: return .depotOperationCoalesced
        case .promoted: return .depotOperationPromoted
        case .retried: return .depotOperationRetried
        case .finished: return .depotOperationFinished
        case .failed: return .depotOperationFailed
        case .cancelled: return .depotOperationCancelled
        case .waitingForNetwork: return .depotOperationWaitingForNetwork
        case .qualityChanged: return .depotQualityChanged
        case .concurrencyChanged: return .depotConcurrencyChanged
        case .categoryPaused: return .depotCategoryPaused
        case .categoryResumed: return .depotCategoryResumed
        case .probing: return .depotProbing
        }
    }
}
