import Foundation
import Synchronization

/// Moves one HTTP exchange over some medium: URLSession, AsyncHTTPClient, files,
/// or a simulated link.
///
/// Transports are deliberately dumb. They send exactly the request they are
/// given and stream back exactly what arrives. The ``NetworkController`` does
/// the rest, the same way for every transport: redirects (at most 10, secrets
/// dropped across origins, https→http refused), the body size limit, timeouts,
/// progress and transfer samples.
///
/// Contract:
/// - `send` returns as soon as the response head is known; the body follows in
///   ``TransportResponse/body``.
/// - Never follow redirects: return 3xx responses as they are.
/// - Stop the transfer (and release the connection) when the caller stops
///   iterating the body or the calling task is cancelled.
/// - Report failures as ``DepotError`` with code `.offline` (refused, DNS,
///   unreachable), `.connectionLost` (reset, truncated), `.timedOut` or `.cancelled`.
public protocol Transport: Sendable {
    /// Sends `request` and returns once the response head has arrived.
    func send(_ request: TransportRequest) async throws -> TransportResponse

    /// Releases the transport's resources. Called by ``NetworkController/shutdown(grace:)``.
    func shutdown() async
}

extension Transport {
    /// Does nothing: most transports hold nothing that needs closing.
    public func shutdown() async {}
}

/// One request as a transport sees it: everything resolved and encoded.
public struct TransportRequest: Sendable {
    /// The absolute URL.
    public var url: URL
    /// The method.
    public var method: NetworkRequest.Method
    /// Every header to send.
    public var headers: HeaderFields
    /// The encoded body.
    public var body: Data?
    /// The idle timeout; transports may use it as a backstop of their own.
    public var timeout: Duration
    /// The body size limit. Transports that cannot pace reading by the consumer
    /// (URLSession) stop receiving past it, so an endless body cannot fill memory.
    public var maximumBodySize: Int?

    /// Makes a request.
    public init(url: URL, method: NetworkRequest.Method = .get, headers: HeaderFields = [:], body: Data? = nil, timeout: Duration = Timeout.default.idle, maximumBodySize: Int? = nil) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maximumBodySize = maximumBodySize
    }
}

/// A response head and its streaming body.
public struct TransportResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The headers.
    public var headers: HeaderFields
    /// The body, in chunks as they arrive.
    public var body: TransportBody

    /// Makes a response.
    public init(status: Int, headers: HeaderFields = [:], body: TransportBody) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The `Content-Length`, when present and valid.
    public var expectedLength: Int64? {
        guard let value = headers["Content-Length"] else { return nil }
        return Int64(value) ?? Int64(value.trimmingCharacters(in: .whitespaces))
    }

    /// Whether the body carries a `Content-Encoding` other than `identity`:
    /// some transports (URLSession) decode it, so the bytes on the wire and
    /// the bytes seen differ.
    var isEncoded: Bool {
        headers["Content-Encoding"].map { $0.lowercased() != "identity" } ?? false
    }
}

/// A response body as an asynchronous sequence of chunks.
///
/// The transfer stops (and its connection is released) as soon as the body is
/// abandoned: when ``cancel()`` is called, or when the last copy of the body and
/// its iterators are released before the end. Transports do not have to rely on
/// the consumer reading to the end.
public struct TransportBody: AsyncSequence, Sendable {
    public typealias Element = Data
    public typealias Failure = any Error

    /// Where the chunks come from. Pulled and in-memory bodies skip the stream
    /// machinery: a body is made for every response, so it must be cheap.
    private enum Source: Sendable {
        case data(Data)
        case pull(@Sendable () async throws -> Data?)
        case stream(AsyncThrowingStream<Data, any Error>)
    }

    private let source: Source
    private let stopper: Stopper?

    /// A body fed by a transport through a continuation.
    ///
    /// - Parameters:
    ///   - bufferingPolicy: How many chunks may wait for the consumer (all of them).
    ///   - onTermination: Called once when the consumer abandons the body,
    ///     and also after a normal end. Stop the transfer here.
    public static func makeStream(
        bufferingPolicy: AsyncThrowingStream<Data, any Error>.Continuation.BufferingPolicy = .unbounded,
        onTermination: @escaping @Sendable () -> Void = {}
    ) -> (body: TransportBody, continuation: AsyncThrowingStream<Data, any Error>.Continuation) {
        let (stream, continuation) = AsyncThrowingStream<Data, any Error>.makeStream(bufferingPolicy: bufferingPolicy)
        let stopper = Stopper {
            continuation.finish(throwing: DepotError(.cancelled))
            onTermination()
        }
        // Weak: the producer holds the continuation, and must not keep the stopper alive.
        continuation.onTermination = { [weak stopper] _ in stopper?.stop() }
        return (TransportBody(source: .stream(stream), stopper: stopper), continuation)
    }

    /// A body that is already in memory.
    public init(data: Data) {
        self.source = .data(data)
        self.stopper = nil
    }

    /// A body pulled chunk by chunk: `next` is called when the consumer wants more,
    /// and returns `nil` at the end. Only one iterator may pull at a time.
    public init(unfolding next: @escaping @Sendable () async throws -> Data?) {
        // The stopper is the flag: no separate locked flag, nor a closure to set it.
        let stopper = Stopper()
        self.source = .pull { stopper.isStopped ? nil : try await next() }
        self.stopper = stopper
    }

    /// An empty body.
    public static var empty: TransportBody { TransportBody(data: Data()) }

    private init(source: Source, stopper: Stopper?) {
        self.source = source
        self.stopper = stopper
    }

    /// Stops the transfer: a streamed body ends with ``DepotError/Code/cancelled``,
    /// a pulled body reads no further chunk and releases its source with the body.
    public func cancel() {
        stopper?.stop()
    }

    public func makeAsyncIterator() -> Iterator {
        switch source {
        case .data(let data): return Iterator(base: .data(data.isEmpty ? nil : data), stopper: stopper)
        case .pull(let next): return Iterator(base: .pull(next), stopper: stopper)
        case .stream(let stream): return Iterator(base: .stream(stream.makeAsyncIterator()), stopper: stopper)
        }
    }

    /// Iterates the chunks; keeps the transfer alive while it is in use.
    public struct Iterator: AsyncIteratorProtocol {
        enum Base {
            case data(Data?)
            case pull((@Sendable () async throws -> Data?)?)
            case stream(AsyncThrowingStream<Data, any Error>.AsyncIterator)
        }

        var base: Base
        let stopper: Stopper?

        public mutating func next() async throws -> Data? {
            switch base {
            case .data(let data):
                base = .data(nil)
                return data
            case .pull(let next):
                guard let next else { return nil }
                try Task.checkCancellation()
                let chunk: Data?
                do {
                    chunk = try await next()
                } catch {
                    // A failed body ends: the next call returns nil instead of pulling again.
                    base = .pull(nil)
                    throw error
                }
                guard let chunk else {
                    base = .pull(nil)
                    return nil
                }
                return chunk
            case .stream(var iterator):
                let chunk = try await iterator.next()
                base = .stream(iterator)
                return chunk
            }
        }
    }

    /// Runs its action once: on `stop()` or when the last holder lets go.
    final class Stopper: Sendable {
        private struct State {
            var action: (@Sendable () -> Void)?
            var isStopped = false
        }

        private let state: Mutex<State>

        init(_ action: (@Sendable () -> Void)? = nil) {
            state = Mutex(State(action: action))
        }

        /// Whether `stop()` ran (or the last holder let go).
        var isStopped: Bool { state.withLock { $0.isStopped } }

        func stop() {
            let run = state.withLock { state in
                defer { state.action = nil; state.isStopped = true }
                return state.action
            }
            run?()
        }

        deinit { stop() }
    }
}
