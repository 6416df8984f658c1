/// How urgent an operation is. The scheduler starts higher priorities first and
/// keeps FIFO order within a priority.
public enum Priority: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// Prefetches and work nobody is waiting for.
    case veryLow = 0
    /// Images and other work that can wait.
    case low = 1
    /// The default.
    case normal = 2
    /// Work the user is looking at, such as a timeline refresh.
    case high = 3
    /// Work the user just asked for, such as a post.
    case veryHigh = 4

    public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .veryLow: return "veryLow"
        case .low: return "low"
        case .normal: return "normal"
        case .high: return "high"
        case .veryHigh: return "veryHigh"
        }
    }
}

/// A named group of operations that can be paused, resumed or cancelled together.
///
/// ```swift
/// extension OperationCategory { static let avatars: OperationCategory = "avatars" }
/// controller.pause(category: .images)
/// ```
public struct OperationCategory: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The category's name.
    public let rawValue: String
    /// A category named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// A category named by a string literal: `let avatars: OperationCategory = "avatars"`.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// Operations that name no category.
    public static let `default`: OperationCategory = "default"
    /// Image downloads; paused first on a poor network.
    public static let images: OperationCategory = "images"
    /// Timeline and feed refreshes.
    public static let timeline: OperationCategory = "timeline"

    public var description: String { rawValue }
}

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

/// How long an operation may wait for the network.
///
/// ```swift
/// var timeout: Timeout { .idle(.seconds(10)) }
/// ```
public struct Timeout: Sendable, Hashable {
    /// The longest the transfer may go without receiving a byte.
    public var idle: Duration
    /// The longest the whole transfer may take, if limited.
    public var total: Duration?

    /// Makes a timeout.
    public init(idle: Duration, total: Duration? = nil) {
        self.idle = idle
        self.total = total
    }

    /// No byte for `duration` means timed out.
    public static func idle(_ duration: Duration) -> Timeout { Timeout(idle: duration) }

    /// 60 s without a byte, and no total limit. The classic URL loading default.
    public static let `default` = Timeout(idle: .seconds(60))
}

/// How an operation shares its transfer with identical operations.
public struct Coalescing: Sendable, Hashable {
    enum Base: Hashable, Sendable {
        case automatic
        case never
        case key(String)
    }

    let base: Base

    /// GET and HEAD coalesce by operation type, method and resolved URL; mutations never do.
    public static let automatic = Coalescing(base: .automatic)
    /// Never share this operation's transfer.
    public static let never = Coalescing(base: .never)
    /// Share with operations of the same type that give the same key.
    public static func key(_ key: String) -> Coalescing { Coalescing(base: .key(key)) }
}
