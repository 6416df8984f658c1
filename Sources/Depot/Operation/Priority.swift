/// How urgent an operation is. The scheduler starts higher priorities first and
/// keeps FIFO order within a priority.
///
/// Frozen on purpose: five ordered levels, compared with `<`; a `switch` over
/// them stays exhaustive.
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
