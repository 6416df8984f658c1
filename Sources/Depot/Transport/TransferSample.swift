/// One transfer's measurements: what the connection monitor learns from.
public struct TransferSample: Sendable, Hashable, CustomStringConvertible {
    /// Body bytes received.
    public var bytes: Int64
    /// From sending the request to receiving the response head.
    public var timeToFirstByte: Duration
    /// From the response head to the last body byte.
    public var transferDuration: Duration

    /// Makes a sample.
    public init(bytes: Int64, timeToFirstByte: Duration, transferDuration: Duration) {
        self.bytes = bytes
        self.timeToFirstByte = timeToFirstByte
        self.transferDuration = transferDuration
    }

    /// Bytes per second over the body transfer, when it took measurable time.
    public var bytesPerSecond: Double? {
        let seconds = transferDuration.seconds
        guard seconds > 0 else { return nil }
        return Double(bytes) / seconds
    }

    public var description: String {
        "\(bytes) B, ttfb \(timeToFirstByte.milliseconds) ms, body \(transferDuration.milliseconds) ms"
    }
}

extension Duration {
    /// The duration in seconds, as a Double.
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// The duration in whole milliseconds.
    var milliseconds: Int64 {
        let (s, atto) = components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}
