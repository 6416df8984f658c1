import Depot
import Foundation
import GRDB

/// What one catch-up did.
public struct CatchUpReport: Sendable, Hashable {
    /// Changes applied from the change feed (a full sync's rows not included).
    public var changes: Int
    /// Pages of the change feed fetched.
    public var pages: Int
    /// Whether the rows were replaced by a full sync (a first sync, or the
    /// server could not resume from the cursor).
    public var fullSync: Bool
    /// The cursor kept now.
    public var cursor: String

    /// Makes a report.
    public init(changes: Int = 0, pages: Int = 0, fullSync: Bool = false, cursor: String) {
        self.changes = changes
        self.pages = pages
        self.fullSync = fullSync
        self.cursor = cursor
    }
}

/// The writes of a change feed: changes and their cursor in ONE transaction,
/// on top of which pending mutations are applied again.
struct FeedWriter<Feed: ChangeFeed>: Sendable {
    let feed: Feed
    let store: Store

    /// Where a write starts from.
    enum Base: Sendable {
        /// Only if the kept cursor is still this one (`nil`: none kept):
        /// otherwise another writer moved it, and nothing is written.
        case cursor(String?)
        /// A full sync: the feed's rows are replaced, whatever was kept.
        case replacing
    }

    /// Writes `changes` and `cursor`, with `invalidations`, in one
    /// transaction. Returns `false`, having written nothing, when the kept
    /// cursor is no longer `base`'s.
    func write(_ changes: [Feed.Change], cursor: String, base: Base, invalidations: [CacheInvalidation] = []) async throws(DepotError) -> Bool {
        let feed = feed
        let key = feed.syncKey
        let now = store.currentDate()
        let types = store.mutationTypes.withLock { $0 }
        let written = try await store.write { db -> Bool in
            switch base {
            case .cursor(let expected):
                guard try SyncLedger.cursor(for: key, in: db) == expected else { return false }
            case .replacing:
                try feed.removeAll(from: db)
            }
            for change in changes { try feed.apply(change, to: db) }
            if !invalidations.isEmpty { _ = try SyncLedger.invalidate(invalidations, in: db) }
            try OutboxTable.reapplyPending(db, types: types)
            let isFullSync = if case .replacing = base { true } else { false }
            try SyncLedger.setCursor(cursor, for: key, applied: isFullSync ? 0 : changes.count, in: db)
            try SyncLedger.recordSuccess(for: key, at: now, validators: nil, in: db)
            return true
        }
        if written, !changes.isEmpty { store.scheduleEviction() }
        return written
    }
}

/// One page of a change feed, as an operation: the controller schedules,
/// retries and holds it offline like any other.
struct ChangeFeedPageOperation<Feed: ChangeFeed>: NetworkOperation {
    enum Outcome: Sendable {
        case applied(changes: [Feed.Change], cursor: String, more: Bool)
        /// The server cannot resume from the cursor.
        case startOver
        /// Another writer moved the cursor meanwhile: nothing was written.
        case superseded
    }

    let feed: Feed
    let cursor: String

    var request: NetworkRequest { feed.changesRequest(after: cursor) }
    var priority: Priority { feed.priority }
    var category: OperationCategory { feed.category }
    var name: String { "\(Feed.self) changes" }

    func validate(_ response: NetworkResponse) throws {
        if feed.mustStartOver(response) { return }
        guard (200..<300).contains(response.status) else {
            throw DepotError.forStatus(response.status, body: response.body, operation: name)
        }
    }

    func process(_ response: NetworkResponse, context: OperationContext) async throws -> Outcome {
        if feed.mustStartOver(response) { return .startOver }
        let store = try context.requireStore(for: name)
        let page: ChangePage<Feed.Change>
        do {
            page = try feed.decodeChanges(response)
        } catch {
            throw DepotError.wrap(error, operation: name, fallback: .decoding)
        }
        let writer = FeedWriter(feed: feed, store: store)
        guard try await writer.write(page.changes, cursor: page.cursor, base: .cursor(cursor)) else { return .superseded }
        return .applied(changes: page.changes, cursor: page.cursor, more: page.more && page.cursor != cursor)
    }
}

/// A full sync, as an operation: the feed's rows replaced in one transaction.
struct ChangeFeedSnapshotOperation<Feed: ChangeFeed>: NetworkOperation {
    let feed: Feed

    var request: NetworkRequest { feed.snapshotRequest }
    var priority: Priority { feed.priority }
    var category: OperationCategory { feed.category }
    var name: String { "\(Feed.self) full sync" }

    func process(_ response: NetworkResponse, context: OperationContext) async throws -> (rows: Int, cursor: String) {
        let store = try context.requireStore(for: name)
        let page: ChangePage<Feed.Change>
        do {
            page = try feed.decodeSnapshot(response)
        } catch {
            throw DepotError.wrap(error, operation: name, fallback: .decoding)
        }
        _ = try await FeedWriter(feed: feed, store: store).write(page.changes, cursor: page.cursor, base: .replacing)
        return (page.changes.count, page.cursor)
    }
}

/// Catch-up: pages of the change feed from the kept cursor until the server
/// has no more, each page its own transaction (the writer is free between
/// pages); a full sync when there is no cursor or the server cannot resume.
struct FeedSync<Feed: ChangeFeed>: Sendable {
    let feed: Feed
    let controller: NetworkController
    let store: Store
    var parking: FeedParking?

    /// Catches up. `applied` hears each page's changes once they landed,
    /// with the number applied so far; `replaced` a full sync's row count.
    @MainActor
    func catchUp(
        applied: ([Feed.Change], _ total: Int) -> Void = { _, _ in },
        replaced: (Int) -> Void = { _ in }
    ) async throws(DepotError) -> CatchUpReport {
        var report = CatchUpReport(cursor: "")
        var superseded = 0
        while true {
            guard let cursor = try store.ledger.currentCursor(for: feed.syncKey) else {
                let (rows, cursor) = try await fullSync()
                replaced(rows)
                report.cursor = cursor
                report.fullSync = true
                return report
            }
            report.cursor = cursor
            switch try await perform(ChangeFeedPageOperation(feed: feed, cursor: cursor)) {
            case .applied(let changes, let next, let more):
                report.pages += 1
                report.changes += changes.count
                report.cursor = next
                superseded = 0
                applied(changes, report.changes)
                guard more else { return report }
            case .startOver:
                let (rows, cursor) = try await fullSync()
                replaced(rows)
                report.cursor = cursor
                report.fullSync = true
                return report
            case .superseded:
                // Another writer (a stream, another process) moved the cursor:
                // go on from where it is now. Endless moves are a bug elsewhere.
                superseded += 1
                if superseded > 100 {
                    throw DepotError(.processing, operation: "\(Feed.self) changes", detail: "the cursor of \(feed.syncKey) kept moving under the catch-up")
                }
            }
        }
    }

    /// Replaces the feed's rows and cursor with a full sync.
    @MainActor
    func fullSync() async throws(DepotError) -> (rows: Int, cursor: String) {
        try await perform(ChangeFeedSnapshotOperation(feed: feed))
    }

    /// Runs an operation, queued before the caller suspends.
    @MainActor
    private func perform<Operation: NetworkOperation>(_ operation: Operation) async throws(DepotError) -> Operation.Output {
        try await controller.performQueuedAtOnce(operation, parking: parking)
    }
}
