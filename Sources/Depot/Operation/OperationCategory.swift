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
