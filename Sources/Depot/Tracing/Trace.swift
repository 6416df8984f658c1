import Foundation

/// A record of what the network controller did: one entry per operation, and
/// how the connection quality changed, on the controller's time line.
///
/// Times are offsets since the controller's origin (its clock when it was
/// made); in JSON they are seconds as numbers, read back to the nanosecond. Export a trace with
/// ``jsonData()`` or draw it as a waterfall with ``svg(_:)``.
///
/// For example:
///
/// ```swift
/// let trace = recorder.trace()
/// try trace.svg().write(to: URL(filePath: "waterfall.svg"), atomically: true, encoding: .utf8)
/// ```
public struct Trace: Sendable, Hashable, Codable {
    /// One operation's life: queued, started, first byte, finished.
    public struct Entry: Sendable, Hashable, Codable {
        /// The operation's (job's) id.
        public var id: UInt64
        /// The operation's name, usually its type.
        public var name: String
        /// Its priority.
        public var priority: Priority
        /// Its category.
        public var category: OperationCategory
        /// When it was enqueued.
        public var enqueued: Duration
        /// When its first attempt started, if it started.
        public var started: Duration?
        /// When the response head of its last attempt arrived, if it did.
        public var firstByte: Duration?
        /// When it ended, if it ended.
        public var finished: Duration?
        /// Body bytes received.
        public var bytes: Int64
        /// How it ended, if it ended.
        public var outcome: Outcome?
        /// How many times it was started (1 without retries).
        public var attempts: Int

        /// Makes an entry.
        public init(id: UInt64, name: String, priority: Priority, category: OperationCategory, enqueued: Duration, started: Duration? = nil, firstByte: Duration? = nil, finished: Duration? = nil, bytes: Int64 = 0, outcome: Outcome? = nil, attempts: Int = 0) {
            self.id = id
            self.name = name
            self.priority = priority
            self.category = category
            self.enqueued = enqueued
            self.started = started
            self.firstByte = firstByte
            self.finished = finished
            self.bytes = bytes
            self.outcome = outcome
            self.attempts = attempts
        }

        enum CodingKeys: String, CodingKey {
            case id, name, priority, category, enqueued, started, firstByte, finished, bytes, outcome, attempts
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(UInt64.self, forKey: .id)
            name = try c.decode(String.self, forKey: .name)
            let priorityName = try c.decode(String.self, forKey: .priority)
            guard let priority = Priority.allCases.first(where: { $0.description == priorityName }) else {
                throw DecodingError.dataCorruptedError(forKey: .priority, in: c, debugDescription: "unknown priority \(priorityName)")
            }
            self.priority = priority
            category = OperationCategory(rawValue: try c.decode(String.self, forKey: .category))
            enqueued = Trace.duration(seconds: try c.decode(Double.self, forKey: .enqueued))
            started = try c.decodeIfPresent(Double.self, forKey: .started).map(Trace.duration(seconds:))
            firstByte = try c.decodeIfPresent(Double.self, forKey: .firstByte).map(Trace.duration(seconds:))
            finished = try c.decodeIfPresent(Double.self, forKey: .finished).map(Trace.duration(seconds:))
            bytes = try c.decode(Int64.self, forKey: .bytes)
            outcome = try c.decodeIfPresent(Outcome.self, forKey: .outcome)
            attempts = try c.decode(Int.self, forKey: .attempts)
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(name, forKey: .name)
            try c.encode(priority.description, forKey: .priority)
            try c.encode(category.rawValue, forKey: .category)
            try c.encode(enqueued.seconds, forKey: .enqueued)
            try c.encodeIfPresent(started?.seconds, forKey: .started)
            try c.encodeIfPresent(firstByte?.seconds, forKey: .firstByte)
            try c.encodeIfPresent(finished?.seconds, forKey: .finished)
            try c.encode(bytes, forKey: .bytes)
            try c.encodeIfPresent(outcome, forKey: .outcome)
            try c.encode(attempts, forKey: .attempts)
        }
    }

    /// How an operation ended. In JSON: `"succeeded"`, `"cancelled"` or `"failed:<code>"`.
    /// Frozen on purpose: an operation ends in one of these three ways.
    public enum Outcome: Sendable, Hashable, Codable, CustomStringConvertible {
        /// It succeeded.
        case succeeded
        /// It failed with this code.
        case failed(DepotError.Code)
        /// It was cancelled.
        case cancelled

        public var description: String {
            switch self {
            case .succeeded: return "succeeded"
            case .cancelled: return "cancelled"
            case .failed(let code): return "failed:\(code)"
            }
        }

        public init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            switch text {
            case "succeeded": self = .succeeded
            case "cancelled": self = .cancelled
            default:
                guard text.hasPrefix("failed:"), let base = DepotError.Code.Base(rawValue: String(text.dropFirst(7))) else {
                    throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "unknown outcome \(text)"))
                }
                self = .failed(DepotError.Code(base: base))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(description)
        }
    }

    /// The connection quality from a point in time on.
    public struct QualityChange: Sendable, Hashable, Codable {
        /// When the quality changed.
        public var at: Duration
        /// The quality from then on.
        public var quality: ConnectionQuality

        /// Makes a change.
        public init(at: Duration, quality: ConnectionQuality) {
            self.at = at
            self.quality = quality
        }

        enum CodingKeys: String, CodingKey { case at, quality }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            at = Trace.duration(seconds: try c.decode(Double.self, forKey: .at))
            let name = try c.decode(String.self, forKey: .quality)
            guard let quality = ConnectionQuality.allCases.first(where: { $0.description == name }) else {
                throw DecodingError.dataCorruptedError(forKey: .quality, in: c, debugDescription: "unknown quality \(name)")
            }
            self.quality = quality
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(at.seconds, forKey: .at)
            try c.encode(quality.description, forKey: .quality)
        }
    }

    /// The operations, in enqueue order.
    public var entries: [Entry]
    /// The quality changes, in time order.
    public var qualityChanges: [QualityChange]
    /// When the trace was taken: the end of its time line.
    public var end: Duration

    /// Makes a trace.
    public init(entries: [Entry] = [], qualityChanges: [QualityChange] = [], end: Duration = .zero) {
        self.entries = entries
        self.qualityChanges = qualityChanges
        self.end = end
    }

    enum CodingKeys: String, CodingKey { case entries, qualityChanges, end }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        entries = try c.decode([Entry].self, forKey: .entries)
        qualityChanges = try c.decode([QualityChange].self, forKey: .qualityChanges)
        end = Trace.duration(seconds: try c.decode(Double.self, forKey: .end))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(entries, forKey: .entries)
        try c.encode(qualityChanges, forKey: .qualityChanges)
        try c.encode(end.seconds, forKey: .end)
    }

    /// A duration from seconds in JSON, to the nanosecond (so what was written reads back equal).
    static func duration(seconds: Double) -> Duration {
        .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// The trace as JSON (sorted keys, pretty printed): times in seconds.
    ///
    /// For example: `{"end": 12.5, "entries": [{"id": 1, "name": "FetchTimeline", "enqueued": 0.1, ...}], ...}`.
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self)
    }

    /// Reads a trace written by ``jsonData()``.
    ///
    /// - Parameter data: The JSON.
    public init(jsonData data: Data) throws {
        self = try JSONDecoder().decode(Trace.self, from: data)
    }
}
