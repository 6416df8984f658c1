/// What an operation does when the network is gone.
///
/// For example, a search that is useless later:
///
/// ```swift
/// struct Search: NetworkOperation {
///     var offlineBehavior: OfflineBehavior { .failFast }
///     ...
/// }
/// ```
public struct OfflineBehavior: Sendable, Hashable, CustomStringConvertible {
    enum Base: Hashable {
        case waitForConnectivity
        case failFast
    }

    let base: Base

    /// Stay queued while offline and run when the network is back. A transfer
    /// that finds no network goes back to the queue (with a
    /// ``NetworkEvent/Kind/waitingForNetwork`` event) instead of failing.
    /// The default for GET and HEAD.
    public static let waitForConnectivity = OfflineBehavior(base: .waitForConnectivity)
    /// Fail with ``DepotError/Code/offline`` at once, never waiting for the
    /// network. While the controller is offline and has nothing queued or
    /// running, the operation is first sent once, as the probe that finds out
    /// whether the network is back. The default for other methods.
    public static let failFast = OfflineBehavior(base: .failFast)

    public var description: String {
        switch base {
        case .waitForConnectivity: "waitForConnectivity"
        case .failFast: "failFast"
        }
    }
}
