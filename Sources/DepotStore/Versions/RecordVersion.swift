import Depot
import Foundation

/// The version of a record a server gave: what a ``Mutation`` based on it
/// sends as `If-Match`, and what ``RecordVersions`` keeps so that the cache
/// never goes back to an older one.
///
/// Two kinds exist:
/// - a **counter** (``init(_:)``): the record's integer `version` field. Its
///   entity tag is the number in quotes (`"3"`), and counters are ordered,
///   so an older one is recognised (read-your-writes, see
///   ``RecordVersions/admit(_:for:in:)``);
/// - an **opaque entity tag** (``init(entityTag:)``), as an `ETag` header
///   gives it: sent back as it came, but not ordered, so any tag that differs
///   is taken as the newer one.
public struct RecordVersion: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The entity tag, quotes included, as `If-Match` sends it: `"3"`.
    public var entityTag: String
    /// The counter, for versions that are ordered; `nil` for opaque tags.
    public var counter: Int64?

    /// Version `counter` of a record whose versions count up: its entity tag
    /// is `"<counter>"`.
    public init(_ counter: Int) {
        self.counter = Int64(counter)
        self.entityTag = "\"\(counter)\""
    }

    /// An opaque entity tag, as the server's `ETag` gave it, quotes included.
    /// Use a strong tag: `If-Match` compares strongly, so a server refuses
    /// every weak (`W/"…"`) one.
    public init(entityTag: String) {
        self.entityTag = entityTag
        self.counter = nil
    }

    /// The version a response's `ETag` header names, or `nil` if it has none
    /// or a weak one (`W/"…"`), which `If-Match` cannot use.
    public init?(etagOf response: NetworkResponse) {
        guard let tag = response.headers["ETag"]?.trimmingCharacters(in: .whitespaces), !tag.isEmpty, !tag.hasPrefix("W/") else { return nil }
        self.init(entityTag: tag)
    }

    /// Whether this version is known to be older than `other`: both are
    /// counters and this one is smaller. Opaque tags are never older.
    public func isOlder(than other: RecordVersion) -> Bool {
        guard let counter, let newer = other.counter else { return false }
        return counter < newer
    }

    /// The entity tag: `"3"`.
    public var description: String { entityTag }
}
