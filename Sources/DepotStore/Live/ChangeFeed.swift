import Depot
import Foundation
import GRDB

/// An endpoint that reports what changed since a cursor: rows written and
/// rows deleted (tombstones), in pages, and, if the server can, live as
/// server-sent events. Depot applies the changes to the cache in the same
/// one-transaction way as a ``CachingOperation``, with the cursor kept in the
/// ``SyncLedger`` beside them, so every change lands exactly once across
/// offline spells, quits and kill -9.
///
/// You describe the endpoint; ``LiveFeed`` runs it:
/// - **catch-up**: pages of ``changesRequest(after:)`` until the server has
///   no more, each page ONE transaction with its cursor;
/// - **a full sync**: on the first run, or when the server cannot resume
///   from the cursor (`410 Gone`, see ``mustStartOver(_:)``), the rows are
///   replaced by ``snapshotRequest`` in ONE transaction, so a
///   ``ResultsController`` sees one change set;
/// - **live**: ``eventsRequest``, a `text/event-stream`, each batch of events
///   ONE transaction with the last event's id as the cursor.
///
/// Pending optimistic mutations (``Mutation``) are applied again on top of
/// every write, as after a refresh.
///
/// For example, the decoding of a feed's events (<doc:LiveData> writes a
/// whole feed, step by step):
///
/// ```swift
/// func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<MessageChange> {
///     let data = Data(event.data.utf8)
///     switch event.type {
///     case "message": return .changes([.write(try JSONDecoder().decode(Message.self, from: data))])
///     case "delete": return .changes([.delete(id: try JSONDecoder().decode(Deleted.self, from: data).id)])
///     case "stale": return .invalidate([.tag(event.data)])
///     case "reset": return .startOver
///     default: return .ignore
///     }
/// }
/// ```
public protocol ChangeFeed: Sendable {
    /// One change: a row written, or a row deleted.
    associatedtype Change: Sendable

    /// The key the cursor and the sync record are kept under in the ledger;
    /// a ``SyncStatus`` for this key shows the feed.
    var syncKey: String { get }

    /// The request for the changes after `cursor`.
    func changesRequest(after cursor: String) -> NetworkRequest

    /// Decodes one page of changes. Throwing fails the catch-up and nothing
    /// of the page lands.
    func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<Change>

    /// The request for a full sync: everything the feed holds, with the
    /// cursor it is current as of (a header, or a field of the body), so
    /// that no change made between the fetch and the stream is missed.
    var snapshotRequest: NetworkRequest { get }

    /// Decodes a full sync: every row as a change, and the cursor. Its
    /// `more` is ignored.
    func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<Change>

    /// Writes one change: an upsert, or a deletion. Runs inside the page's,
    /// event batch's or full sync's one write transaction.
    func apply(_ change: Change, to db: Database) throws

    /// Deletes every row the feed holds, before a full sync writes its rows
    /// in the same transaction.
    func removeAll(from db: Database) throws

    /// Whether `response` says the server cannot resume from the cursor.
    /// Default: `410 Gone`.
    func mustStartOver(_ response: NetworkResponse) -> Bool

    /// The server-sent events stream of live changes, or `nil` when the
    /// server has none (the feed then catches up when asked). It is sent
    /// with `Last-Event-ID` set to the kept cursor. Default: `nil`.
    var eventsRequest: NetworkRequest? { get }

    /// Decodes one server-sent event: changes to apply, a request to start
    /// over, keys or tags to invalidate, or nothing. Throwing skips the
    /// event: it is recorded in the ``SyncStatus`` and the feed's events,
    /// and the stream goes on. Default: throws (a feed without a stream).
    func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<Change>

    /// The priority of the feed's requests. Default: `.normal`.
    var priority: Priority { get }
    /// The category of the feed's requests. Default: `.default`.
    var category: OperationCategory { get }
}

extension ChangeFeed {
    public func mustStartOver(_ response: NetworkResponse) -> Bool { response.status == 410 }
    public var eventsRequest: NetworkRequest? { nil }
    public func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<Change> {
        throw DepotError(.decoding, detail: "\(Self.self) has no event stream")
    }
    public var priority: Priority { .normal }
    public var category: OperationCategory { .default }
}

/// One page of a change feed, or a full sync.
public struct ChangePage<Change: Sendable>: Sendable {
    /// The changes, oldest first.
    public var changes: [Change]
    /// The cursor after the last change: the next page asks for changes after it.
    public var cursor: String
    /// Whether the server has more changes after this page.
    public var more: Bool

    /// Makes a page.
    public init(_ changes: [Change], cursor: String, more: Bool = false) {
        self.changes = changes
        self.cursor = cursor
        self.more = more
    }
}

/// What one server-sent event means to a ``ChangeFeed``.
public enum LiveMessage<Change: Sendable>: Sendable {
    /// A data event: changes to apply, with the event's id as the cursor.
    case changes([Change])
    /// A poke: these keys or tags are stale. Their ledger entries are marked
    /// in the event's transaction, so a live ``SyncStatus`` refreshes them
    /// (conditionally, with the validators it kept).
    case invalidate([CacheInvalidation])
    /// The server cannot resume from the cursor: the feed catches up
    /// through its change feed (and a full sync if that cannot resume either).
    case startOver
    /// Nothing to do (an event type the app does not know).
    case ignore
}
