import AsyncHTTPClient
import Depot
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// A ``Depot/Transport`` on AsyncHTTPClient: SwiftNIO underneath, streaming
/// bodies, and a strong choice on Linux.
///
/// ```swift
/// let transport = AsyncHTTPClientTransport()
/// let controller = NetworkController(configuration: .init(baseURL: url, transport: transport))
/// // ...
/// _ = await controller.shutdown(grace: .seconds(5))   // also shuts the client down
/// ```
///
/// The controller follows redirects itself, so the client must not: a transport
/// made with ``init(configuration:tlsConfiguration:)`` turns the client's own
/// redirects off.
///
/// TLS is set up by SwiftNIO SSL's `TLSConfiguration`, as for `HTTPClient`: pass
/// one to trust a private certificate authority, present a client certificate
/// or change how certificates are verified. A certificate the client does not
/// trust fails the request with ``Depot/DepotError/Code/transport`` and a detail
/// that says so ("TLS: the server's certificate is not trusted").
public final class AsyncHTTPClientTransport: Transport {
    /// The client requests go through.
    public let client: HTTPClient
    private let ownsClient: Bool
    private let isShutDown = Atomic<Bool>(false)

    /// Makes a transport with its own client.
    ///
    /// For example, to trust your own certificate authority as well as the
    /// system's:
    ///
    /// ```swift
    /// var tls = TLSConfiguration.makeClientConfiguration()
    /// tls.additionalTrustRoots = [.file("/etc/myapp/ca.pem")]
    /// let transport = AsyncHTTPClientTransport(tlsConfiguration: tls)
    /// ```
    ///
    /// - Parameters:
    ///   - configuration: The client's configuration. Its redirect
    ///     configuration is replaced with `.disallow`.
    ///   - tlsConfiguration: How connections to `https` URLs are secured: trust
    ///     roots, certificate verification, client certificate, TLS versions.
    ///     It replaces the configuration's own. With `nil`, the configuration's
    ///     own applies; by default that trusts the system's roots and verifies
    ///     the certificate and the host name.
    public init(
        configuration: HTTPClient.Configuration = AsyncHTTPClientTransport.defaultConfiguration,
        tlsConfiguration: TLSConfiguration? = nil
    ) {
        var configuration = configuration
        configuration.redirectConfiguration = .disallow
        // The controller makes each transfer's span and injects its `traceparent`;
        // the client's own span would add a second `traceparent` header.
        configuration.tracing.tracer = nil
        if let tlsConfiguration {
            configuration.tlsConfiguration = tlsConfiguration
        }
        self.client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        self.ownsClient = true
    }

    /// Uses a client you own and shut down yourself. Make it with
    /// `redirectConfiguration: .disallow`, or Depot's redirect rules cannot apply,
    /// and with `tracing.tracer = nil`: the controller traces each transfer and
    /// injects its `traceparent`, and the client's own would add a second one.
    public init(client: HTTPClient) {
        self.client = client
        self.ownsClient = false
    }

    /// No client-side redirects, no silent connection retries, a 10 s connect timeout, 8 connections per host.
    public static var defaultConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10))
        )
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 8)
        // A refused connection must fail at once: the controller decides about offline and retries.
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    public func send(_ request: Depot.TransportRequest) async throws -> TransportResponse {
        var outgoing = HTTPClientRequest(url: request.url.absoluteString)
        outgoing.method = NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue)
        outgoing.headers.reserveCapacity(request.headers.count)
        for field in request.headers {
            outgoing.headers.add(name: field.name, value: field.value)
        }
        if let body = request.body {
            outgoing.body = .bytes(ByteBuffer(data: body))
        }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(outgoing, deadline: .distantFuture)
        } catch {
            throw Self.map(error)
        }
        var headers = HeaderFields()
        headers.reserveCapacity(response.headers.count)
        for (name, value) in response.headers {
            headers.add(name: name, value: value)
        }
        // Pull-based: a chunk is read from the connection only when the consumer asks,
        // so a slow consumer or an endless body cannot fill memory. Dropping the body
        // (or cancelling the consuming task) makes AsyncHTTPClient drop the request.
        let reader = BodyReader(response.body.makeAsyncIterator())
        let body = TransportBody(unfolding: { try await reader.next() })
        return TransportResponse(status: Int(response.status.code), headers: headers, body: body)
    }

    public func shutdown() async {
        guard ownsClient, !isShutDown.exchange(true, ordering: .relaxed) else { return }
        try? await client.shutdown()
    }

    deinit {
        // A client must be shut down before it is released; do it for a
        // transport whose controller never shut down.
        if ownsClient, !isShutDown.exchange(true, ordering: .relaxed) {
            client.shutdown(queue: .global()) { _ in }
        }
    }

    /// Maps AsyncHTTPClient's and SwiftNIO's errors onto Depot's codes.
    static func map(_ error: any Error) -> DepotError {
        if let error = error as? DepotError { return error }
        if error is CancellationError { return DepotError(.cancelled) }
        if let failure = tlsFailure(error) { return failure }
        if let error = error as? HTTPClientError {
            switch error {
            case .cancelled, .requestStreamCancelled:
                return DepotError(.cancelled, underlying: error)
            case .readTimeout, .writeTimeout, .deadlineExceeded, .getConnectionFromPoolTimeout:
                return DepotError(.timedOut, underlying: error)
            case .connectTimeout:
                return DepotError(.offline, detail: "connect timed out", underlying: error)
            case .remoteConnectionClosed, .bodyLengthMismatch, .contentLengthMissing:
                return DepotError(.connectionLost, underlying: error)
            case .invalidURL, .emptyHost, .emptyScheme:
                return DepotError(.invalidRequest, underlying: error)
            default:
                return DepotError(.transport, underlying: error)
            }
        }
        if error is NIOConnectionError {
            return DepotError(.offline, underlying: error)
        }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout: return DepotError(.offline, detail: "connect timed out", underlying: error)
            case .ioOnClosedChannel, .outputClosed, .inputClosed, .eof, .alreadyClosed:
                return DepotError(.connectionLost, underlying: error)
            default: return DepotError(.transport, underlying: error)
            }
        }
        if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, ENETDOWN:
                return DepotError(.offline, underlying: error)
            case ECONNRESET, EPIPE, ECONNABORTED, ETIMEDOUT:
                return DepotError(.connectionLost, underlying: error)
            default:
                return DepotError(.transport, underlying: error)
            }
        }
        if error is HTTPParserError {
            return DepotError(.connectionLost, detail: "malformed HTTP from the server", underlying: error)
        }
        return DepotError(.transport, underlying: error)
    }
}

/// Reads an AsyncHTTPClient body chunk by chunk for a ``TransportBody``.
///
/// `@unchecked Sendable` is sound: `iterator` is touched only inside `next()`, and
/// `reading` lets one call in at a time; a second concurrent reader (two
/// iterators over one body) gets an error instead of a data race.
private final class BodyReader: @unchecked Sendable {
    private var iterator: HTTPClientResponse.Body.AsyncIterator
    private let reading = Atomic<Bool>(false)

    init(_ iterator: HTTPClientResponse.Body.AsyncIterator) {
        self.iterator = iterator
    }

    func next() async throws -> Data? {
        guard reading.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            throw DepotError(.transport, detail: "a response body was read by two iterators at once")
        }
        defer { reading.store(false, ordering: .releasing) }
        do {
            guard let buffer = try await iterator.next() else { return nil }
            // Copied up to 256 KB: the pipeline keeps a body that arrives in one
            // chunk as that chunk, and a small body must not keep NIO's whole
            // read buffer alive for as long as the response lives.
            return Data(buffer: buffer, byteTransferStrategy: .automatic)
        } catch {
            throw AsyncHTTPClientTransport.map(error)
        }
    }
}
