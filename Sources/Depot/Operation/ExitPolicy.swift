/// What happens to an operation when the app exits through
/// ``NetworkController/shutdown(grace:)``.
///
/// ```swift
/// var exitPolicy: ExitPolicy { .finish }  // a post: let it go out
/// ```
///
/// A struct with static members rather than an enum, so that policies can be
/// added without breaking a `switch`: compare with `==`.
public struct ExitPolicy: Sendable, Hashable, CustomStringConvertible {
    enum Base: Sendable, Hashable {
        case cancel
        case finish
    }

    let base: Base

    /// Cancel it at once (the default: fetches, images).
    public static let cancel = ExitPolicy(base: .cancel)
    /// Let it finish within the grace period (posts, payments).
    public static let finish = ExitPolicy(base: .finish)

    public var description: String { "\(base)" }
}
