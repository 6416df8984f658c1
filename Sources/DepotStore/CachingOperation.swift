import Depot
import Foundation
import GRDB

/// An operation that parses what it fetches and writes it into the ``Store``, in
/// one transaction together with its ``SyncLedger`` entry.
///
/// This is the design's "process into the cache inside the operation". You write
/// two small pieces: `parse` turns the response into a payload (off the
/// database), and `write` puts the payload into the database. Depot runs `write`
/// and the ledger update in ONE write transaction: if anything throws, nothing
/// lands and observers see nothing.
///
/// For example:
///
/// ```swift
/// struct FetchTopSongs: CachingOperation {
///     var request: NetworkRequest { .get("topsongs/limit=25/json") }
///     var cacheKey: String { "topsongs" }
///
///     func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Song] {
///         try response.decode(Feed.self).songs
///     }
///
///     func write(_ songs: [Song], to db: Database) throws {
///         try Song.deleteAll(db)
///         for song in songs { try song.insert(db) }
///     }
/// }
/// ```
///
/// GET operations send conditional requests by default: the `ETag` and
/// `Last-Modified` of the last full response from the same URL go out as
/// `If-None-Match` and `If-Modified-Since`, and a 304 leaves the data
/// untouched, updates `lastSynced` and returns ``CacheUpdate/notModified``.
/// Validators are kept per request URL, not per ``cacheKey``: a key fetched
/// with other parameters (another limit, another page) sends no validator
/// that belongs to a different response.
///
/// To parse while writing (a streaming XML parser that inserts items as it meets
/// them, say), let `Payload` be the `NetworkResponse` and parse inside `write`; a
/// failure halfway still rolls everything back. To parse while the body is still
/// arriving, never holding it whole, conform to ``StreamingCachingOperation``.
public protocol CachingOperation: NetworkOperation where Output == CacheUpdate<Written> {
    /// What `parse` produces and `write` consumes.
    associatedtype Payload: Sendable = NetworkResponse
    /// What `write` returns (a count, new identifiers), if anything.
    associatedtype Written: Sendable = Void

    /// The resource key in the ledger. Default: the method and the request's path
    /// or URL with its query, such as `GET topsongs/limit=25/json`.
    var cacheKey: String { get }

    /// Whether to send `If-None-Match` / `If-Modified-Since` from the ledger.
    /// Default: `true` for GET.
    var sendsConditionalRequests: Bool { get }

    /// Tags for the ledger entry, so that one ``CacheInvalidation/tag(_:)``
    /// marks every resource that carries it stale (every page and bucket of
    /// the tasks, say). Replaced by each successful sync. Default: none.
    var cacheTags: Set<String> { get }

    /// Turns the response into a payload. Runs outside the database transaction.
    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> Payload

    /// Writes the payload. Runs inside the operation's single write transaction.
    func write(_ payload: Payload, to db: Database) throws -> Written
}

/// What a ``CachingOperation`` did to the cache. Frozen on purpose: it wrote, or
/// the server said nothing changed.
public enum CacheUpdate<Written: Sendable>: Sendable {
    /// New data was written; `write` returned this value.
    case updated(Written)
    /// The server answered 304 Not Modified: the cached data is still current.
    case notModified

    /// The value `write` returned, or `nil` for a 304.
    public var written: Written? {
        if case .updated(let value) = self { return value }
        return nil
    }
}

extension CacheUpdate: Equatable where Written: Equatable {}

extension CachingOperation {
    public var cacheKey: String {
        let request = self.request
        var key = "\(request.method) "
        switch request.target {
        case .path(let path): key += path
        case .url(let url): key += url.absoluteString
        }
        if !request.query.isEmpty {
            key += "?" + request.query.map { "\($0.name)=\($0.value ?? "")" }.joined(separator: "&")
        }
        return key
    }

    public var sendsConditionalRequests: Bool { request.method == .get }

    public var cacheTags: Set<String> { [] }

    /// Accepts 304 Not Modified when the operation sends conditional requests,
    /// and otherwise validates like any operation.
    public func validate(_ response: NetworkResponse) throws {
        if response.status == 304, sendsConditionalRequests { return }
        guard (200..<300).contains(response.status) else {
            throw DepotError.forStatus(response.status, body: response.body, operation: name)
        }
    }

    /// Adds the validators of the last full response from this URL to a
    /// conditional request.
    public func prepare(_ request: inout TransportRequest, context: OperationContext) async throws {
        try await addValidators(to: &request, context: context, holdsData: { _ in true })
    }

    /// Adds the validators of the last full response from this URL, if
    /// `holdsData` says the cache holds what they validate: a 304 confirms
    /// the cached data, so without it the request must bring the data whole.
    func addValidators(to request: inout TransportRequest, context: OperationContext, holdsData: @escaping @Sendable (Database) throws -> Bool) async throws {
        guard sendsConditionalRequests, !request.headers.contains("If-None-Match"), !request.headers.contains("If-Modified-Since") else { return }
        let url = SyncLedger.validatorKey(for: request.url)
        let store = try context.requireStore(for: name)
        guard let validators = try await store.read({ db in try holdsData(db) ? SyncLedger.validators(for: url, in: db) : nil }) else { return }
        if let etag = validators.etag { request.headers["If-None-Match"] = etag }
        if let lastModified = validators.lastModified { request.headers["If-Modified-Since"] = lastModified }
    }

    /// Parses, then writes the payload and the ledger entry in one transaction.
    /// A 304 only updates `lastSynced` and the freshness its headers give; a 304 to a request that sent no
    /// validators fails with ``/Depot/DepotError/Code/unexpectedStatus``. A failure is
    /// recorded in the ledger (in a transaction of its own, after the rollback)
    /// and rethrown.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> CacheUpdate<Written> {
        let store = try context.requireStore(for: name)
        let key = cacheKey
        // The URL the validators belong to: the one the request went to, before redirects.
        let url = SyncLedger.validatorKey(for: context.requestURL ?? response.url)
        do {
            if response.status == 304 {
                let now = store.currentDate()
                // A 304 says how long the resource stays fresh from now on.
                let freshness = Freshness(response.headers, receivedAt: now)
                let ownValidators = request.headers.contains("If-None-Match") || request.headers.contains("If-Modified-Since")
                try await store.write { db in
                    // A 304 confirms what a conditional request named. Without validators
                    // for this URL (a first sync, another URL of the key, or after a
                    // reset) it confirms nothing, and marking the key synced would show
                    // an empty cache, or another response's rows, as fresh.
                    guard try ownValidators || SyncLedger.validators(for: url, in: db) != nil else {
                        throw DepotError(.unexpectedStatus, operation: name, status: 304, detail: "304 Not Modified to a request without validators")
                    }
                    try SyncLedger.recordSuccess(for: key, at: now, validators: nil, in: db)
                    try SyncLedger.recordFreshness(freshness, for: key, url: url, in: db)
                }
                return .notModified
            }
            let payload = try await parse(response, context: context)
            let record = SyncRecord(self, response: response, url: url, store: store)
            let written = try await store.write { db in
                let written = try self.write(payload, to: db)
                try record.apply(in: db)
                return written
            }
            store.scheduleEviction()
            return .updated(written)
        } catch {
            throw await store.recordCachingFailure(error, operation: name, response: response, key: key)
        }
    }
}

extension Store {
    /// `error` as the caching operation's ``/Depot/DepotError``, recorded in the
    /// ledger for `key` (in a transaction of its own, after the rollback)
    /// unless it is a cancellation.
    func recordCachingFailure(_ error: any Error, operation: String, response: NetworkResponse, key: String) async -> DepotError {
        var failure = DepotError.wrap(error, operation: operation, fallback: .processing)
        if failure.status == nil { failure.status = response.status }
        if failure.code != .cancelled { await ledger.recordFailure(failure, for: key) }
        return failure
    }
}

/// What a caching write records beside its data, in its transaction.
struct SyncRecord: Sendable {
    var key: String
    var now: Date
    var validators: Validators
    var freshness: Freshness
    var url: String
    var tags: Set<String>
    var mutationTypes: [String: any Mutation.Type]
    /// Whether the operation caches a value (``CachedValueOperation``).
    var isValue: Bool

    init<Operation: CachingOperation>(_ operation: Operation, response: NetworkResponse, url: String, store: Store) {
        key = operation.cacheKey
        now = store.currentDate()
        validators = Validators(response.headers)
        freshness = Freshness(response.headers, receivedAt: now)
        self.url = url
        tags = operation.cacheTags
        mutationTypes = store.mutationTypes.withLock { $0 }
        isValue = operation is any CachedValueOperation
    }

    /// Re-applies pending mutations and records the success, with its
    /// validators and tags, after the operation's own writes.
    func apply(in db: Database) throws {
        // Pending writes stay on screen: their optimistic changes go
        // on top of what the server sent, in the same transaction.
        try OutboxTable.reapplyPending(db, types: mutationTypes)
        try SyncLedger.recordSuccess(for: key, at: now, validators: validators, url: url, in: db)
        try SyncLedger.recordFreshness(freshness, for: key, url: url, in: db)
        try SyncLedger.setTags(tags, for: key, in: db)
        if isValue { try ValueTable.stamp(key: key, at: now, in: db) }
    }
}

extension CachingOperation where Payload == NetworkResponse {
    /// Passes the response through: parse it inside `write`.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> NetworkResponse {
        response
    }
}

extension CachingOperation where Payload: Decodable {
    /// Decodes the body as JSON.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> Payload {
        try response.decode(Payload.self)
    }
}
