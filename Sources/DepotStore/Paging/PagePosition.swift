import Foundation

/// Where a page starts: the first page, a cursor the server gave, a page
/// number, or an item id to continue before or after.
///
/// A ``PageableEndpoint`` turns a position into the operation for that page,
/// and its page's ``PageContents`` name the next position. Positions are
/// stored with the paging state, so a later launch continues where the last
/// one stopped.
///
/// For example, the three common shapes of paged APIs:
///
/// ```swift
/// let cursor: PagePosition = .cursor("eyJpZCI6NDJ9")   // GET items?cursor=eyJpZCI6NDJ9
/// let number: PagePosition = .number(3)                // GET items?page=3
/// let older: PagePosition = .before(id: 120)           // GET timeline?before=120
/// ```
public struct PagePosition: Sendable, Hashable, CustomStringConvertible {
    enum Kind: String, Sendable, Hashable {
        case start, cursor, number, before, after
    }

    let kind: Kind
    let value: String

    /// The first page, for APIs whose first request names no page.
    public static let start = PagePosition(kind: .start, value: "")

    /// The page an opaque server cursor points to.
    public static func cursor(_ cursor: String) -> PagePosition { PagePosition(kind: .cursor, value: cursor) }

    /// Page `number`, counted as the server counts (usually from 1).
    public static func number(_ number: Int) -> PagePosition { PagePosition(kind: .number, value: String(number)) }

    /// The items listed before the item `id` (older ones, in a newest-first list).
    public static func before(id: Int) -> PagePosition { PagePosition(kind: .before, value: String(id)) }
    /// The items listed before the item `id` (older ones, in a newest-first list).
    public static func before(id: String) -> PagePosition { PagePosition(kind: .before, value: id) }

    /// The items listed after the item `id`: a `since_id` API's next page.
    public static func after(id: Int) -> PagePosition { PagePosition(kind: .after, value: String(id)) }
    /// The items listed after the item `id`: a `since_id` API's next page.
    public static func after(id: String) -> PagePosition { PagePosition(kind: .after, value: id) }

    /// Whether this is ``start``.
    public var isStart: Bool { kind == .start }
    /// The cursor, for a ``cursor(_:)`` position.
    public var cursor: String? { kind == .cursor ? value : nil }
    /// The page number, for a ``number(_:)`` position.
    public var number: Int? { kind == .number ? Int(value) : nil }
    /// The id to continue before, for a ``before(id:)-(Int)`` position.
    public var beforeID: String? { kind == .before ? value : nil }
    /// The id to continue after, for an ``after(id:)-(Int)`` position.
    public var afterID: String? { kind == .after ? value : nil }

    public var description: String {
        switch kind {
        case .start: "start"
        case .cursor: "cursor \"\(value)\""
        case .number: "page \(value)"
        case .before: "before id \(value)"
        case .after: "after id \(value)"
        }
    }

    /// Why this position cannot be a next page, or `nil` when it can: an
    /// empty or blank cursor, a page number that is not one, an empty id.
    var malformation: String? {
        switch kind {
        case .start: "the next page cannot be the first page"
        case .cursor where value.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty: "the next page's cursor is empty"
        case .cursor where value.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) }): "the next page's cursor holds control characters"
        case .number where Int(value) == nil: "the next page number is not a number"
        case .before, .after: value.isEmpty ? "the next page's item id is empty" : nil
        default: nil
        }
    }

    // MARK: - Stored form

    /// The form kept in the paging table: `kind:value`.
    var stored: String { "\(kind.rawValue):\(value)" }

    init(kind: Kind, value: String) {
        self.kind = kind
        self.value = value
    }

    init?(stored: String) {
        guard let colon = stored.firstIndex(of: ":"), let kind = Kind(rawValue: String(stored[..<colon])) else { return nil }
        self.init(kind: kind, value: String(stored[stored.index(after: colon)...]))
    }
}
