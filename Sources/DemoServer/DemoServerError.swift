/// Why the demo server could not do what was asked.
public struct DemoServerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    public var description: String { "depot-server: \(message)" }
}
