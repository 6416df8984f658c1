import Foundation

/// An operation that takes an accepted response's body as it arrives, so
/// that the whole body is never held in memory.
///
/// Why it exists: a ``NetworkOperation`` gets the whole body in
/// ``NetworkResponse/body``, and a body of 50 MB costs 50 MB. An operation
/// that parses as bytes come in (a streaming XML parser, a database write
/// that goes on while the body arrives) opts in by conforming to this
/// protocol instead. Every other operation behaves as before.
///
/// Once the head of a 2xx response with a body is in (not HEAD, 204 or 304),
/// the controller asks ``makeBodySink(for:context:)`` for a sink; `nil` keeps
/// the body buffered for this attempt. Every other status is buffered, and
/// goes through `validate` and the interceptors as always. The body then goes
/// to the sink chunk by chunk, the next chunk read only once the sink has
/// taken the last one: the size limit, timeouts, the `Content-Length` check
/// and progress apply as to a buffered body.
///
/// Contract, per sink: ``ResponseBodySink/receive(_:)`` is called for each
/// chunk in order, never concurrently; then exactly one of these happens:
/// - the body is complete and accepted: `validate` and the interceptors saw
///   the response (its ``NetworkResponse/body`` is empty), and
///   ``process(_:streamedTo:context:)`` turns the sink into the output;
/// - the sink's `receive` threw: nothing more is read, and
///   `process(_:streamedTo:context:)` follows with the part it took (its
///   error is the operation's);
/// - anything else (a transfer failure, a timeout, cancellation, `validate`
///   throwing, an interceptor asking for a retry): ``ResponseBodySink/fail(_:)``.
///   A retried attempt gets a fresh sink.
///
/// Memory: the controller reads the next chunk only once the sink took the
/// last one. Whether the network then waits too is the transport's:
/// `AsyncHTTPClientTransport` stops reading from the socket, while
/// ``URLSessionTransport`` keeps in memory what arrives ahead of the sink.
///
/// For example, counting a body's bytes without keeping them:
///
/// ```swift
/// struct CountBytes: StreamingNetworkOperation {
///     var request: NetworkRequest { .get("big.bin") }
///
///     final class Counter: ResponseBodySink {
///         let total = Mutex(0)
///         func receive(_ chunk: Data) async throws { total.withLock { $0 += chunk.count } }
///         func fail(_ error: DepotError) async {}
///     }
///
///     func makeBodySink(for response: NetworkResponse, context: OperationContext) async throws -> Counter? {
///         Counter()
///     }
///
///     func process(_ response: NetworkResponse, streamedTo sink: Counter, context: OperationContext) async throws -> Int {
///         sink.total.withLock { $0 }
///     }
///
///     func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int {
///         response.body.count   // a body that was not streamed
///     }
/// }
/// ```
public protocol StreamingNetworkOperation: NetworkOperation {
    /// Where this operation's bodies go.
    associatedtype BodySink: ResponseBodySink

    /// The sink for this attempt's body, or `nil` to receive it whole in
    /// ``NetworkOperation/process(_:context:)``.
    ///
    /// - Parameters:
    ///   - response: The status, headers and URL; its body is empty.
    ///   - context: This attempt's context; its `requestURL` is the URL the
    ///     request went to, before redirects.
    /// - Throws: Fails the operation: a `DepotError` as it is, anything else
    ///   as ``DepotError/Code/processing`` with the response's status (not
    ///   retried as a transfer failure would be).
    func makeBodySink(for response: NetworkResponse, context: OperationContext) async throws -> BodySink?

    /// Turns a body that went to `sink`, complete and accepted, into the
    /// output. Runs where ``NetworkOperation/process(_:context:)`` would.
    ///
    /// - Parameters:
    ///   - response: The status, headers and URL; its body is empty.
    ///   - sink: The sink that took the body.
    ///   - context: The operation's context.
    func process(_ response: NetworkResponse, streamedTo sink: BodySink, context: OperationContext) async throws -> Output
}

/// Takes a response's body as it arrives; see ``StreamingNetworkOperation``.
///
/// The controller awaits `receive` before it reads the next chunk, so over a
/// transport that stops reading meanwhile (`AsyncHTTPClientTransport`) a sink
/// that holds a few chunks bounds the memory of the transfer. The time a sink
/// takes does not count against the idle timeout; it does against the total one.
public protocol ResponseBodySink: Sendable {
    /// Takes the next chunk of the body. Throw to stop the transfer early:
    /// nothing more is read, and ``StreamingNetworkOperation/process(_:streamedTo:context:)``
    /// follows, whose error is the operation's (a parser that met a
    /// malformed document needs no more of it).
    func receive(_ chunk: Data) async throws

    /// The body will not be used: undo what the sink did with it. Called at
    /// most once, instead of `process(_:streamedTo:context:)`, even in a
    /// cancelled task.
    ///
    /// - Parameter error: Why: the transfer's failure (`.connectionLost` for a
    ///   truncated body, `.timedOut`, `.tooLarge`, `.cancelled`), or what
    ///   `validate` or an interceptor decided.
    func fail(_ error: DepotError) async
}
