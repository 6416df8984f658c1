import Foundation
import Logging

/// A key for a value that the controller hands to every operation through
/// ``OperationContext``. This is how a cache is injected into operations.
///
/// ```swift
/// enum DatabaseKey: OperationContextKey { static let defaultValue: Database? = nil }
/// extension OperationContext { var database: Database? { self[DatabaseKey.self] } }
/// ```
public protocol OperationContextKey {
    /// The value's type.
    associatedtype Value: Sendable
    /// The value when none was set.
    static var defaultValue: Value { get }
}

/// Typed values set on the controller's ``NetworkController/Configuration`` and
/// read by operations.
public struct OperationContextValues: Sendable {
    private var storage: [ObjectIdentifier: any Sendable] = [:]

    /// Makes an empty set of values.
    public init() {}

    /// The value for `key`, or its default.
    public subscript<Key: OperationContextKey>(key: Key.Type) -> Key.Value {
        get { storage[ObjectIdentifier(key)] as? Key.Value ?? Key.defaultValue }
        set { storage[ObjectIdentifier(key)] = newValue }
    }
}

/// What an operation gets besides the response while it processes it.
public struct OperationContext: Sendable {
    /// The ticket of the operation being processed.
    public let ticket: Ticket.ID
    /// Which attempt this is, starting at 1.
    public let attempt: Int
    /// The controller's wall clock (``DepotEnvironment/date``)
    /// when this attempt began: use it instead of `Date()`, so tests control it.
    public let now: Date
    /// A logger with the operation's metadata (`depot.ticket`, `depot.operation`) attached.
    public var logger: Logger {
        guard let operationName else { return baseLogger }
        var logger = baseLogger
        logger[metadataKey: "depot.ticket"] = "\(ticket)"
        logger[metadataKey: "depot.operation"] = "\(operationName)"
        return logger
    }

    // Metadata is attached on access: setting it costs allocations (and a
    // re-render in some handlers) on every operation otherwise.
    private let baseLogger: Logger
    private let operationName: String?
    /// The values configured on the controller.
    public let values: OperationContextValues
    /// In `process`, the URL the request was sent to (after adapters and
    /// `prepare`, before any redirect); `nil` in `prepare`, and in a context
    /// made for a test unless it gives one. The response's own `url` is
    /// where the last redirect led.
    public let requestURL: URL?

    /// Makes a context; useful for calling `process` directly in a test.
    public init(ticket: Ticket.ID = Ticket.ID(rawValue: 0), attempt: Int = 1, now: Date = Date(), logger: Logger = Logger(label: "depot"), values: OperationContextValues = OperationContextValues(), requestURL: URL? = nil) {
        self.init(ticket: ticket, attempt: attempt, now: now, logger: logger, values: values, operationName: nil, requestURL: requestURL)
    }

    init(ticket: Ticket.ID, attempt: Int, now: Date, logger: Logger, values: OperationContextValues, operationName: String?, requestURL: URL? = nil) {
        self.ticket = ticket
        self.attempt = attempt
        self.now = now
        self.baseLogger = logger
        self.values = values
        self.operationName = operationName
        self.requestURL = requestURL
    }

    /// The value for `key`.
    public subscript<Key: OperationContextKey>(key: Key.Type) -> Key.Value {
        values[key]
    }
}
