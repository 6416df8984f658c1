import Depot
import Foundation
import GRDB

/// A ``CachingOperation`` that writes while the body arrives: the whole body
/// is never held, and memory is bounded by what `write` keeps, not by the body.
///
/// Once the head of a 2xx response is in, Depot opens the operation's ONE
/// write transaction and calls ``write(_:of:to:)`` in it, on the store's
/// writer, with the body as a ``StreamedBody``; the transfer hands chunks to
/// it as they come. The transaction commits only once the whole body has
/// arrived and the response is accepted, with the pending mutations
/// re-applied and the ledger entry (validators, tags), as a buffered
/// ``CachingOperation`` does. If the transfer fails halfway (truncated, timed
/// out, lost, cancelled), or `write` throws, everything rolls back and a retry
/// starts a fresh transaction. As with a buffered body, what `write` threw
/// goes to the ledger, and the transfer's failure does not (a ``SyncStatus``
/// records the sync's final outcome).
///
/// Don't implement ``process(_:streamedTo:context:)`` yourself: the default
/// commits the transaction.
///
/// A 304, any other status and a direct call of `process` go through
/// ``CachingOperation/write(_:to:)`` as before.
///
/// For example, a feed merged as a streaming parser meets its items:
///
/// ```swift
/// struct FetchFeed: StreamingCachingOperation {
///     let url: URL
///     var request: NetworkRequest { .get(url) }
///
///     func write(_ body: StreamedBody, of response: NetworkResponse, to db: Database) throws -> Int {
///         let parser = ItemParser { items in try insert(items, into: db) }   // a push parser
///         while let chunk = try body.next() { try parser.feed(chunk) }
///         return try parser.finish()
///     }
///
///     func write(_ response: NetworkResponse, to db: Database) throws -> Int {
///         try insert(ItemParser.parse(response.body), into: db)   // a body that was not streamed
///     }
/// }
/// ```
///
/// The store's writer is held while the body arrives: other writes to the
/// store wait for it, so stream bodies that arrive quickly, or give the
/// operation a total timeout.
public protocol StreamingCachingOperation: CachingOperation, StreamingNetworkOperation where BodySink == CacheWriteSink<Written> {
    /// Writes the body as it arrives. Runs inside the operation's single write
    /// transaction, on the store's writer. Read the body with
    /// ``StreamedBody/next()`` until it returns `nil`, and let what it throws
    /// propagate.
    ///
    /// - Parameters:
    ///   - body: The body's chunks, in order.
    ///   - response: The status, headers and URL (after redirects); its body is empty.
    ///   - db: The database, in the transaction.
    func write(_ body: StreamedBody, of response: NetworkResponse, to db: Database) throws -> Written
}

extension StreamingCachingOperation {
    /// Opens the write transaction that takes the body.
    public func makeBodySink(for response: NetworkResponse, context: OperationContext) async throws -> CacheWriteSink<Written>? {
        let store = try context.requireStore(for: name)
        // The URL the validators belong to: the one the request went to, before redirects.
        let url = SyncLedger.validatorKey(for: context.requestURL ?? response.url)
        let record = SyncRecord(self, response: response, url: url, store: store)
        let body = StreamedBody()
        let name = self.name
        let writing = Task<Written, any Error> {
            do {
                return try await store.write { db in
                    do {
                        let written = try self.write(body, of: response, to: db)
                        body.finishReading(error: nil)
                        // Commit only once the body is complete and accepted.
                        try body.awaitEnd()
                        try record.apply(in: db)
                        return written
                    } catch {
                        body.finishReading(error: error)
                        throw error
                    }
                }
            } catch {
                // Rolled back. A failure of the write (or of a transaction that
                // never began) is recorded in a transaction of its own, as
                // `process` records a buffered one. The transfer's own failure
                // is not: as for a buffered body, the controller retries it or
                // reports it, and a retry that succeeds shows no error between.
                var failure = DepotError.wrap(error, operation: name, fallback: .processing)
                if failure.status == nil { failure.status = response.status }
                // A transaction that never began (the store closed or busy) never read:
                // the transfer, waiting for room, must hear it and stop.
                body.finishReading(error: failure)
                if failure.code != .cancelled, !body.failedWithTheTransfer {
                    await store.ledger.recordFailure(failure, for: record.key)
                }
                throw failure
            }
        }
        return CacheWriteSink(body: body, writing: writing, store: store)
    }

    /// Commits the transaction that took the body, and returns what `write` returned.
    public func process(_ response: NetworkResponse, streamedTo sink: CacheWriteSink<Written>, context: OperationContext) async throws -> CacheUpdate<Written> {
        .updated(try await sink.commit())
    }
}

/// Where a ``StreamingCachingOperation``'s body goes: its write transaction,
/// open on the store's writer while the body arrives. Depot makes and uses it;
/// an app never needs to.
public final class CacheWriteSink<Written: Sendable>: ResponseBodySink {
    private let body: StreamedBody
    private let writing: Task<Written, any Error>
    private let store: Store

    init(body: StreamedBody, writing: Task<Written, any Error>, store: Store) {
        self.body = body
        self.writing = writing
        self.store = store
    }

    deinit {
        // A sink dropped unused must not leave the transaction waiting.
        body.fail(DepotError(.cancelled, detail: "the streamed body was dropped"))
    }

    /// Hands the chunk to the transaction, waiting while it has a few to take.
    public func receive(_ chunk: Data) async throws {
        try await body.send(chunk)
    }

    /// Rolls the transaction back and returns once it has (and the failure is in the ledger).
    public func fail(_ error: DepotError) async {
        body.fail(error)
        _ = try? await writing.value
    }

    /// Ends the body, waits for the commit and returns what `write` returned.
    func commit() async throws -> Written {
        body.complete()
        let written = try await writing.value
        store.scheduleEviction()
        return written
    }
}
