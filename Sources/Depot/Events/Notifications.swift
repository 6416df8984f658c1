import Foundation

// Every notification Depot posts is declared in this file.
//
// Each is posted on the controller's `Configuration.observability.notificationCenter`
// (`NotificationCenter.default` unless you choose another), with the
// controller as its object (so an observer can follow one controller) and
// this userInfo:
//
// | key                                  | value                  |
// |--------------------------------------|------------------------|
// | `NetworkEvent.UserInfoKey.event`     | the `NetworkEvent` (its `ticket`, `operation`, `time` and `kind`) |
// | `NetworkEvent.UserInfoKey.error`     | the `DepotError` (`.depotOperationFailed` only) |
//
// Progress is not posted (it stays on `events` and `Ticket.progress`).
//
// ```swift
// center.addObserver(forName: .depotOperationFailed, object: controller, queue: .main) { note in
//     guard let event = note.userInfo?[NetworkEvent.UserInfoKey.event] as? NetworkEvent else { return }
//     print(event.operation, event.ticket, note.userInfo?[NetworkEvent.UserInfoKey.error] ?? "")
// }
// ```

extension Notification.Name {
    /// An operation joined the queue.
    public static let depotOperationEnqueued = Notification.Name("DepotOperationEnqueued")
    /// An operation's transfer started.
    public static let depotOperationStarted = Notification.Name("DepotOperationStarted")
    /// Body bytes arrived for an operation.
    public static let depotOperationProgress = Notification.Name("DepotOperationProgress")
    /// An operation joined an identical one already queued or in flight.
    public static let depotOperationCoalesced = Notification.Name("DepotOperationCoalesced")
    /// A queued operation was promoted to a higher priority.
    public static let depotOperationPromoted = Notification.Name("DepotOperationPromoted")
    /// An operation will be retried.
    public static let depotOperationRetried = Notification.Name("DepotOperationRetried")
    /// An operation succeeded.
    public static let depotOperationFinished = Notification.Name("DepotOperationFinished")
    /// An operation failed; userInfo carries the error.
    public static let depotOperationFailed = Notification.Name("DepotOperationFailed")
    /// An operation was cancelled.
    public static let depotOperationCancelled = Notification.Name("DepotOperationCancelled")
    /// An operation found no network and waits in the queue.
    public static let depotOperationWaitingForNetwork = Notification.Name("DepotOperationWaitingForNetwork")
    /// The connection quality changed (controller-wide).
    public static let depotQualityChanged = Notification.Name("DepotQualityChanged")
    /// The concurrency limit changed (controller-wide).
    public static let depotConcurrencyChanged = Notification.Name("DepotConcurrencyChanged")
    /// A quality rule paused a category (controller-wide).
    public static let depotCategoryPaused = Notification.Name("DepotCategoryPaused")
    /// A quality rule resumed a category (controller-wide).
    public static let depotCategoryResumed = Notification.Name("DepotCategoryResumed")
    /// Offline, the controller lets one queued operation try the network (controller-wide).
    public static let depotProbing = Notification.Name("DepotProbing")
    /// An operation needs credentials and waits in the queue for a sign-in.
    public static let depotOperationWaitingForCredentials = Notification.Name("DepotOperationWaitingForCredentials")
    /// The token authenticator lost its credential (controller-wide): show a sign-in screen.
    public static let depotSignedOut = Notification.Name("DepotSignedOut")
    /// The token authenticator got a credential (controller-wide).
    public static let depotSignedIn = Notification.Name("DepotSignedIn")
}

extension NetworkEvent {
    /// Keys of the userInfo dictionary of Depot's notifications.
    ///
    /// The event carries the ticket and the operation's name
    /// (``NetworkEvent/ticket``, ``NetworkEvent/operation``).
    public enum UserInfoKey {
        /// The `NetworkEvent`.
        public static let event = "event"
        /// The `DepotError`, on failures only.
        public static let error = "error"
    }

    var userInfo: [AnyHashable: Any] {
        // Built by subscript, not from a literal: the literal's array of pairs
        // was one more allocation per post.
        var info = [AnyHashable: Any](minimumCapacity: 2)
        info[UserInfoKey.event] = self
        if case .failed(let error) = detail { info[UserInfoKey.error] = error }
        return info
    }
}
