/// How long an operation may wait for the network.
///
/// ```swift
/// var timeout: Timeout { .idle(.seconds(10)) }
/// ```
public struct Timeout: Sendable, Hashable {
    /// The longest the transfer may go without receiving a byte.
    public var idle: Duration
    /// The longest the whole transfer (each attempt) may take, if limited.
    public var total: Duration?

    /// Makes a timeout.
    public init(idle: Duration, total: Duration? = nil) {
        self.idle = idle
        self.total = total
    }

    /// No byte for `duration` means timed out.
    public static func idle(_ duration: Duration) -> Timeout { Timeout(idle: duration) }

    /// 60 s without a byte, and 5 minutes in all: URL loading's idle
    /// default, with a total limit so that a server that drips one byte at a
    /// time cannot hold an operation for hours. An operation that downloads
    /// something big sets its own (`Timeout(idle: .seconds(60), total: nil)`
    /// for none); ``NetworkController/Configuration/Limits/longestTransfer`` caps
    /// every operation's.
    public static let `default` = Timeout(idle: .seconds(60), total: .seconds(300))

    /// This timeout with its total limited to `cap` (a `nil` cap changes nothing).
    func capped(at cap: Duration?) -> Timeout {
        guard let cap else { return self }
        return Timeout(idle: idle, total: total.map { min($0, cap) } ?? cap)
    }
}
