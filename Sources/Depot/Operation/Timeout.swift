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
