import Foundation

/// One endpoint: a small, discrete, testable unit of network work.
///
/// Each endpoint gets its own type. It says what to ask for and how to turn the
/// answer into something the app keeps. The ``NetworkController`` decides when
/// it runs, shares identical GETs, enforces limits and reports progress.
///
/// For example:
///
/// ```swift
/// struct FetchTopSongs: NetworkOperation {
///     var limit = 10
///     var request: NetworkRequest { .get("/topsongs/limit=\(limit)/json") }
///     var priority: Priority { .high }
///
///     func process(_ response: NetworkResponse, context: OperationContext) async throws -> [String] {
///         try response.decode(TopSongsFeed.self).feed.entry.map(\.title.label)
///     }
/// }
/// ```
///
/// Contract:
/// - `request` must be cheap and side-effect free; it may be read more than once.
/// - `process` runs once per successful transfer, off the main actor. Throwing
///   from it fails the operation; Depot wraps the error in a ``DepotError``.
/// - Everything but `request` and `process` has a default.
public protocol NetworkOperation: Sendable {
    /// What `process` produces and the completion receives.
    associatedtype Output: Sendable

    /// The request to send.
    var request: NetworkRequest { get }

    /// Turns an accepted response into the output, for example by parsing it and
    /// writing it to the cache: the design's `processResponse`.
    func process(_ response: NetworkResponse, context: OperationContext) async throws -> Output

    /// Checks the response before `process`. The default accepts 2xx and maps
    /// 401/403 to `.unauthorized`, 404 to `.notFound`, 5xx to `.server` and
    /// anything else to `.unexpectedStatus`.
    func validate(_ response: NetworkResponse) throws

    /// Adjusts the encoded request just before it is sent, after the controller's
    /// adapters, with the operation's context at hand. The default does nothing.
    ///
    /// This is where an operation adds what depends on the cache, such as the
    /// `If-None-Match` validator of a conditional request.
    func prepare(_ request: inout TransportRequest, context: OperationContext) async throws

    /// How urgent this is. Default: `.normal`.
    var priority: Priority { get }
    /// The group this belongs to. Default: `.default`.
    var category: OperationCategory { get }
    /// What shutdown does with it. Default: `.cancel`.
    var exitPolicy: ExitPolicy { get }
    /// Whether identical operations share one transfer. Default: `.automatic`.
    var coalescing: Coalescing { get }
    /// How long it may wait for bytes. Default: ``Timeout/default``.
    var timeout: Timeout { get }
    /// The name used in logs, events and errors. Default: the type's name.
    var name: String { get }
    /// What happens when there is no network. Default: `.waitForConnectivity`
    /// for GET and HEAD, `.failFast` for the rest.
    var offlineBehavior: OfflineBehavior { get }
    /// Whether a bad network may drop this while it is queued (see
    /// ``QualityRules``). Default: `false`. Prefetches and thumbnails are good candidates.
    var isDroppable: Bool { get }
    /// When a failed attempt is retried; `nil` uses the controller's policy. Default: `nil`.
    var retryPolicy: RetryPolicy? { get }
    /// Whether this is a long-lived stream, such as server-sent events: a
    /// response that stays open for as long as the app listens. Default: `false`.
    ///
    /// A long-lived operation holds no concurrency slot (it starts whenever
    /// the network is up and its category is not paused), has no total
    /// deadline (``Timeout/total`` and the controller's `longestTransfer` do
    /// not apply; the idle timeout does, so a stream that stops sending even
    /// heartbeats fails), its streamed body does not count against
    /// `maximumBodySize` (its ``ResponseBodySink`` bounds the memory), its
    /// transfers are not samples of the link, and shutdown cancels it at once
    /// whatever its ``exitPolicy``. A drop after the stream was up counts its
    /// reconnects from the first attempt again. Make it a
    /// ``StreamingNetworkOperation``, so that the body reaches a sink as it arrives.
    var isLongLived: Bool { get }
}

extension NetworkOperation {
    public var priority: Priority { .normal }
    public var category: OperationCategory { .default }
    public var exitPolicy: ExitPolicy { .cancel }
    public var coalescing: Coalescing { .automatic }
    public var timeout: Timeout { .default }
    public var name: String { TypeNames.of(Self.self).short }
    public var offlineBehavior: OfflineBehavior {
        let method = request.method
        return method == .get || method == .head ? .waitForConnectivity : .failFast
    }
    public var isDroppable: Bool { false }
    public var retryPolicy: RetryPolicy? { nil }
    public var isLongLived: Bool { false }

    public func prepare(_ request: inout TransportRequest, context: OperationContext) async throws {}

    public func validate(_ response: NetworkResponse) throws {
        guard (200..<300).contains(response.status) else {
            throw DepotError.forStatus(response.status, body: response.body, operation: name)
        }
    }
}

extension NetworkOperation where Output == NetworkResponse {
    /// Hands back the response itself.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> NetworkResponse {
        response
    }
}

extension NetworkOperation where Output: Decodable {
    /// Decodes the body as JSON.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> Output {
        try response.decode(Output.self)
    }
}
