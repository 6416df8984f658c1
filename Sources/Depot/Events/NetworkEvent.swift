import Foundation

/// Something that happened to an operation, as seen by the ``NetworkController``.
///
/// Read them from ``NetworkController/events()`` or observe the matching
/// notifications (see `Notification.Name.depotOperationFinished` and friends).
///
/// ```swift
/// for await event in controller.events() {
///     if event.kind == .failed, let error = event.error { print(event.operation ?? "", error) }
/// }
/// ```
///
/// New kinds will be added over time; switch with a `default` clause.
public struct NetworkEvent: Sendable, CustomStringConvertible {
    /// What happened: one of the static members, such as ``enqueued`` or
    /// ``failed``. The values that go with it are properties of the event
    /// (``NetworkEvent/error``, ``NetworkEvent/attempt``, ...).
    ///
    /// A struct, not an enum, so that new kinds can be added without breaking
    /// a `switch`: match with `==` or `case .failed:` and keep a `default:`.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        enum Base: UInt8, Sendable {
            case enqueued, started, progress, coalesced, promoted, retried, finished, failed, cancelled, waitingForNetwork, waitingForCredentials, qualityChanged, concurrencyChanged, categoryPaused, categoryResumed, probing, signedOut, signedIn
        }

        let base: Base

        /// The operation joined the queue (``priority``, ``category``).
        public static let enqueued = Kind(base: .enqueued)
        /// Its transfer started (``attempt`` 1, 2, ...).
        public static let started = Kind(base: .started)
        /// Body bytes arrived (``progress``). Not posted as a notification.
        public static let progress = Kind(base: .progress)
        /// It shares the transfer of another ticket (``coalescedInto``) instead of making its own.
        public static let coalesced = Kind(base: .coalesced)
        /// Its queued job now runs at a higher priority (``previousPriority`` to ``priority``) because a more urgent caller joined.
        public static let promoted = Kind(base: .promoted)
        /// An attempt (``attempt``) failed with ``error`` and another follows after ``delay``.
        public static let retried = Kind(base: .retried)
        /// It succeeded (``finished`` holds its measurements).
        public static let finished = Kind(base: .finished)
        /// It failed with ``error``.
        public static let failed = Kind(base: .failed)
        /// It was cancelled.
        public static let cancelled = Kind(base: .cancelled)
        /// The transfer found no network (``error``); the operation waits in the queue for it (``OfflineBehavior/waitForConnectivity``).
        public static let waitingForNetwork = Kind(base: .waitingForNetwork)
        /// Controller-wide: the connection quality changed (``previousQuality`` to ``quality``).
        public static let qualityChanged = Kind(base: .qualityChanged)
        /// Controller-wide: the concurrency limit changed to ``concurrencyLimit`` (policy, offline, probe).
        public static let concurrencyChanged = Kind(base: .concurrencyChanged)
        /// Controller-wide: a quality rule paused ``category``.
        public static let categoryPaused = Kind(base: .categoryPaused)
        /// Controller-wide: a quality rule resumed ``category``.
        public static let categoryResumed = Kind(base: .categoryResumed)
        /// Controller-wide: offline, the controller lets one queued operation try the network (``attempt``).
        public static let probing = Kind(base: .probing)
        /// The operation needs credentials that are not there (its ``TokenAuthenticator``
        /// signed out) and waits in the queue for a sign-in; ``error`` says why.
        public static let waitingForCredentials = Kind(base: .waitingForCredentials)
        /// Controller-wide: the ``TokenAuthenticator`` lost its credential (a
        /// refused refresh, or ``TokenAuthenticator/signOut()``); ``reason`` says which.
        public static let signedOut = Kind(base: .signedOut)
        /// Controller-wide: the ``TokenAuthenticator`` got a credential; held work goes on.
        public static let signedIn = Kind(base: .signedIn)

        /// Whether the operation ended: ``finished``, ``failed`` or ``cancelled``.
        /// A ticket has no events after its terminal one.
        public var isTerminal: Bool { self == .finished || self == .failed || self == .cancelled }

        public var description: String { "\(base)" }
    }

    /// What happened, with its values. Internal: users read ``kind`` and the
    /// typed properties, so that a new kind breaks no `switch`.
    package enum Detail: Sendable {
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
        /// The operation waits in the queue for a sign-in.
        case waitingForCredentials(DepotError)
        /// Controller-wide: the authenticator lost its credential.
        case signedOut(reason: String)
        /// Controller-wide: the authenticator got a credential.
        case signedIn
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
    /// The ticket it is about; `nil` for a controller-wide event (quality,
    /// concurrency limit, paused categories, probes).
    public var ticket: Ticket.ID?
    /// The operation's name; `nil` for a controller-wide event.
    public var operation: String?
    /// What happened, with its values.
    var detail: Detail
    /// The event's place among its ticket's events (1, 2, ...), numbered under
    /// the controller's lock; 0 for progress and controller-wide events.
    var sequence: UInt32 = 0

    /// Makes an event (the controller makes them; tests may too).
    init(time: Duration, ticket: Ticket.ID?, operation: String?, detail: Detail, sequence: UInt32 = 0) {
        self.time = time
        self.ticket = ticket
        self.operation = operation
        self.detail = detail
        self.sequence = sequence
    }

    public var description: String {
        guard let ticket, let operation else { return "[\(time.milliseconds) ms] controller \(detail)" }
        return "[\(time.milliseconds) ms] \(operation) \(ticket) \(detail)"
    }

    /// Whether this is about the controller rather than one ticket (quality,
    /// limit, rules, probes). Such events have no ``ticket`` and no ``operation``.
    public var isControllerWide: Bool { ticket == nil }

    /// The notification name this event is posted under.
    public var notificationName: Notification.Name {
        switch detail {
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
        case .waitingForCredentials: return .depotOperationWaitingForCredentials
        case .signedOut: return .depotSignedOut
        case .signedIn: return .depotSignedIn
        }
    }
}

extension NetworkEvent {
    /// What happened.
    public var kind: Kind {
        switch detail {
        case .enqueued: .enqueued
        case .started: .started
        case .progress: .progress
        case .coalesced: .coalesced
        case .promoted: .promoted
        case .retried: .retried
        case .finished: .finished
        case .failed: .failed
        case .cancelled: .cancelled
        case .waitingForNetwork: .waitingForNetwork
        case .qualityChanged: .qualityChanged
        case .concurrencyChanged: .concurrencyChanged
        case .categoryPaused: .categoryPaused
        case .categoryResumed: .categoryResumed
        case .probing: .probing
        case .waitingForCredentials: .waitingForCredentials
        case .signedOut: .signedOut
        case .signedIn: .signedIn
        }
    }

    /// The error of a ``Kind/failed``, ``Kind/retried``, ``Kind/waitingForNetwork`` or ``Kind/waitingForCredentials`` event.
    public var error: DepotError? {
        switch detail {
        case .failed(let error), .waitingForNetwork(let error), .waitingForCredentials(let error), .retried(_, _, let error): error
        default: nil
        }
    }

    /// Why a ``Kind/signedOut`` event happened: "the refresh was refused" or "signed out".
    public var reason: String? {
        if case .signedOut(let reason) = detail { return reason }
        return nil
    }

    /// The attempt of a ``Kind/started``, ``Kind/retried`` or ``Kind/probing`` event.
    public var attempt: Int? {
        switch detail {
        case .started(let attempt), .retried(let attempt, _, _), .probing(let attempt): attempt
        default: nil
        }
    }

    /// How long until the next attempt, for a ``Kind/retried`` event.
    public var delay: Duration? {
        if case .retried(_, let delay, _) = detail { return delay }
        return nil
    }

    /// The bytes so far, for a ``Kind/progress`` event.
    public var progress: TransferProgress? {
        if case .progress(let progress) = detail { return progress }
        return nil
    }

    /// The measurements of a ``Kind/finished`` event.
    public var finished: Finished? {
        if case .finished(let finished) = detail { return finished }
        return nil
    }

    /// The priority of an ``Kind/enqueued`` event, or the new one of a ``Kind/promoted`` event.
    public var priority: Priority? {
        switch detail {
        case .enqueued(let priority, _), .promoted(_, let priority): priority
        default: nil
        }
    }

    /// The priority a ``Kind/promoted`` job had before.
    public var previousPriority: Priority? {
        if case .promoted(let from, _) = detail { return from }
        return nil
    }

    /// The category of an ``Kind/enqueued``, ``Kind/categoryPaused`` or ``Kind/categoryResumed`` event.
    public var category: OperationCategory? {
        switch detail {
        case .enqueued(_, let category), .categoryPaused(let category), .categoryResumed(let category): category
        default: nil
        }
    }

    /// The ticket whose transfer a ``Kind/coalesced`` ticket shares.
    public var coalescedInto: Ticket.ID? {
        if case .coalesced(let job) = detail { return job }
        return nil
    }

    /// The new quality of a ``Kind/qualityChanged`` event.
    public var quality: ConnectionQuality? {
        if case .qualityChanged(_, let to) = detail { return to }
        return nil
    }

    /// The quality before a ``Kind/qualityChanged`` event.
    public var previousQuality: ConnectionQuality? {
        if case .qualityChanged(let from, _) = detail { return from }
        return nil
    }

    /// The new limit of a ``Kind/concurrencyChanged`` event.
    public var concurrencyLimit: Int? {
        if case .concurrencyChanged(let limit) = detail { return limit }
        return nil
    }
}
