import Foundation

/// Which record a mutation changes, and which record a version, a pending
/// write or a conflict belongs to: a kind and an identifier, as the app names
/// them (`contact` 42).
///
/// The outbox stores it with every entry whose ``Mutation/record`` says so,
/// so that ``RecordState`` can tell a row that waits for the server, and
/// ``RecordVersions`` keeps the server's version under it.
///
/// ```swift
/// var record: RecordKey? { RecordKey("contact", payload.id) }
/// ```
public struct RecordKey: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The kind of record: the app's name for it (`contact`).
    public var kind: String
    /// The record's identifier within its kind, as text (`42`).
    public var id: String

    /// The record `id` of `kind`.
    public init(_ kind: String, _ id: String) {
        self.kind = kind
        self.id = id
    }

    /// The record `id` of `kind`.
    public init(_ kind: String, _ id: some BinaryInteger) {
        self.init(kind, String(id))
    }

    /// `contact #42`.
    public var description: String { "\(kind) #\(id)" }
}
