import Depot
import Foundation
import GRDB

/// A ``CachingOperation`` whose body is written as a stream: the whole body is
/// never held in memory, and memory is bounded by what `write` keeps, not by
/// the body.
///
/// Depot keeps the body as it arrives (its first megabyte in memory, the rest
/// in a temporary file that has no name; see ``StreamedBody``). Once the whole
/// body is in and the response accepted, it opens the operation's ONE write
/// transaction and calls ``write(_:of:to:)`` in it, on the store's writer,
/// with the body to read chunk by chunk. The pending mutations are re-applied
/// and the ledger entry (validators, tags) written in the same transaction,
/// as a buffered ``CachingOperation`` does. The store's writer is free while
/// the body arrives, however slow the link: other writes go on meanwhile.
///
/// If the transfer fails halfway (truncated, timed out, lost, cancelled), the
/// kept body is dropped and nothing is written; a retry starts afresh. If
/// the body cannot be kept (a full disk), the operation fails with
/// ``/Depot/DepotError/Code/storage`` and writes nothing. If `write` throws,
/// everything rolls back. A malformed body is found once it has all arrived:
/// the body limit and the operation's total timeout bound what that costs.
/// As with a buffered body, what `write` threw goes to the ledger, and the
/// transfer's failure does not (a ``SyncStatus`` records the sync's final
/// outcome).
///
/// Don't implement ``process(_:streamedTo:context:)`` yourself: the default
/// runs the write.
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
public protocol StreamingCachingOperation: CachingOperation, StreamingNetworkOperation where BodySink == CacheWriteSink<Written> {
    /// Writes the body. Runs inside the operation's single write transaction,
    /// on the store's writer, once the whole body has arrived. Read the body
    /// with ``StreamedBody/next()`` until it returns `nil`, and let what it
    /// throws propagate.
    ///
    /// - Parameters:
    ///   - body: The body's chunks, in order.
    ///   - response: The status, headers and URL (after redirects); its body is empty.
    ///   - db: The database, in the transaction.
    func write(_ body: StreamedBody, of response: NetworkResponse, to db: Database) throws -> Written
}

extension StreamingCachingOperation {
    /// Makes the sink that keeps the body for the write.
    public func makeBodySink(for response: NetworkResponse, context: OperationContext) async throws -> CacheWriteSink<Written>? {
        let store = try context.requireStore(for: name)
        // The URL the validators belong to: the one the request went to, before redirects.
        let url = SyncLedger.validatorKey(for: context.requestURL ?? response.url)
        let record = SyncRecord(self, response: response, url: url, store: store)
        let name = self.name
        return CacheWriteSink(store: store) { spool in
            do {
                let body = try spool.finish()
                return try await store.write { db in
                    let written = try self.write(body, of: response, to: db)
                    try record.apply(in: db)
                    return written
                }
            } catch {
                throw await store.recordCachingFailure(error, operation: name, response: response, key: record.key)
            }
        }
    }

    /// Writes the body that arrived, and returns what `write` returned.
    public func process(_ response: NetworkResponse, streamedTo sink: CacheWriteSink<Written>, context: OperationContext) async throws -> CacheUpdate<Written> {
        .updated(try await sink.commit())
    }
}

/// Where a ``StreamingCachingOperation``'s body waits for its write transaction
/// while it arrives. Depot makes and uses it; an app never needs to.
public final class CacheWriteSink<Written: Sendable>: ResponseBodySink {
    private let spool: BodySpool
    private let store: Store
    private let write: @Sendable (BodySpool) async throws -> Written

    init(store: Store, write: @escaping @Sendable (BodySpool) async throws -> Written) {
        self.store = store
        self.spool = BodySpool(folder: store.bodySpoolFolder.withLock { $0 })
        self.write = write
    }

    /// Keeps the chunk for the write. If it cannot be kept (a full disk),
    /// the transfer stops, and the write fails with that error.
    public func receive(_ chunk: Data) async throws {
        try spool.append(chunk)
    }

    /// Drops what was kept: nothing is written.
    public func fail(_ error: DepotError) async {
        spool.discard()
    }

    /// Writes the whole body in one transaction and returns what `write` returned.
    func commit() async throws -> Written {
        let written = try await write(spool)
        store.scheduleEviction()
        return written
    }
}
