import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A ``Transport`` on `URLSession`, using delegate-based data tasks so the body
/// streams in chunks on every platform (Linux's URLSession has no `bytes(for:)`).
///
/// The session it makes has no URL cache and no cookie storage: caching and
/// credentials are Depot's job (see ``Credentials`` and DepotStore). Redirects
/// are handed back to the controller, which follows them by its own rules.
///
/// ```swift
/// let transport = URLSessionTransport(maximumConnectionsPerHost: 8)
/// let controller = NetworkController(configuration: .init(transport: transport))
/// ```
///
/// A certificate the system does not trust fails the request with
/// ``DepotError/Code/transport`` and a detail that says so ("TLS: the server's
/// certificate is not trusted"). To pin certificates or trust your own
/// authority on Apple platforms, pass a server-trust hook to
/// ``init(maximumConnectionsPerHost:serverTrust:)``.
public final class URLSessionTransport: Transport {
    private let session: URLSession
    private let delegate: SessionDelegate

    /// Makes a transport with its own session.
    ///
    /// For example, to pin the public key of your server's certificate on Apple
    /// platforms (`pinnedKeys` holds the `SecKeyCopyExternalRepresentation` of
    /// each key you accept):
    ///
    /// ```swift
    /// let transport = URLSessionTransport(serverTrust: { challenge in
    ///     #if canImport(Security)
    ///     guard SecTrustEvaluateWithError(challenge.trust, nil),
    ///           let leaf = (SecTrustCopyCertificateChain(challenge.trust) as? [SecCertificate])?.first,
    ///           let key = SecCertificateCopyKey(leaf),
    ///           let data = SecKeyCopyExternalRepresentation(key, nil) as Data?,
    ///           pinnedKeys.contains(data)
    ///     else { return .reject }
    ///     return .accept
    ///     #else
    ///     return .useSystemEvaluation
    ///     #endif
    /// })
    /// ```
    ///
    /// - Parameters:
    ///   - maximumConnectionsPerHost: The session's connection limit per host.
    ///     Keep it at or above the controller's concurrency limit.
    ///   - serverTrust: Decides about each server certificate, once per
    ///     connection, on the session's delegate queue; keep it quick. It is
    ///     called where URLSession asks its delegate about server trust: on
    ///     Apple platforms. Linux's URLSession verifies certificates itself
    ///     (with the system's roots) and does not call it. `nil`, the default,
    ///     leaves every certificate to the system.
    public init(
        maximumConnectionsPerHost: Int = 16,
        serverTrust: (@Sendable (ServerTrustChallenge) -> ServerTrustDecision)? = nil
    ) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpMaximumConnectionsPerHost = maximumConnectionsPerHost
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        let delegate = SessionDelegate(serverTrust: serverTrust)
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "depot.urlsession.delegate"
        self.delegate = delegate
        self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method.rawValue
        urlRequest.httpBody = request.body
        urlRequest.timeoutInterval = max(1, request.timeout.seconds)
        urlRequest.httpShouldHandleCookies = false
        for field in request.headers {
            urlRequest.addValue(field.value, forHTTPHeaderField: field.name)
        }
        let task = session.dataTask(with: urlRequest)
        let exchange = Exchange(task: task, limit: request.maximumBodySize)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                guard exchange.start(continuation) else { return }
                delegate.register(exchange, for: task.taskIdentifier)
                task.resume()
            }
        } onCancel: {
            // Answer the caller at once; URLSession's own completion callback may come late.
            exchange.cancel()
        }
    }

    public func shutdown() async {
        session.invalidateAndCancel()
    }

    deinit {
        // The session holds its delegate strongly until it is invalidated.
        session.finishTasksAndInvalidate()
    }

    /// Maps URLSession's errors onto Depot's codes.
    static func map(_ error: any Error) -> DepotError {
        guard let urlError = error as? URLError else {
            return DepotError(.transport, underlying: error)
        }
        if let failure = tlsFailure(urlError) { return failure }
        switch urlError.code {
        case .cancelled:
            return DepotError(.cancelled, underlying: urlError)
        case .timedOut:
            return DepotError(.timedOut, underlying: urlError)
        case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet,
             .internationalRoamingOff, .dataNotAllowed, .callIsActive:
            return DepotError(.offline, underlying: urlError)
        case .networkConnectionLost, .badServerResponse, .cannotParseResponse, .zeroByteResource, .cannotDecodeContentData:
            return DepotError(.connectionLost, underlying: urlError)
        case .dataLengthExceedsMaximum:
            return DepotError(.tooLarge, underlying: urlError)
        case .httpTooManyRedirects, .redirectToNonExistentLocation:
            return DepotError(.tooManyRedirects, underlying: urlError)
        default:
            return DepotError(.transport, underlying: urlError)
        }
    }
}

/// One task's bridge from delegate callbacks to a head continuation and a body stream.
private final class Exchange: Sendable {
    private struct State {
        var head: CheckedContinuation<TransportResponse, any Error>?
        var body: AsyncThrowingStream<Data, any Error>.Continuation?
        var cancelled = false
        var trustRefused = false
        var received = 0
    }

    let task: URLSessionDataTask
    let limit: Int?
    private let state = Mutex(State())

    init(task: URLSessionDataTask, limit: Int?) {
        self.task = task
        self.limit = limit
    }

    /// Returns false when the exchange was cancelled before it started.
    func start(_ continuation: CheckedContinuation<TransportResponse, any Error>) -> Bool {
        let cancelled = state.withLock { state in
            if !state.cancelled { state.head = continuation }
            return state.cancelled
        }
        if cancelled { continuation.resume(throwing: DepotError(.cancelled)) }
        return !cancelled
    }

    func received(_ response: URLResponse) {
        let http = response as? HTTPURLResponse
        let fields = http?.allHeaderFields ?? [:]
        var headers = HeaderFields()
        headers.reserveCapacity(fields.count)
        for (name, value) in fields {
            // A cast, not interpolation: describing an AnyHashable goes through
            // several dynamic casts, for every header of every response.
            headers.add(name: name.base as? String ?? "\(name)", value: value as? String ?? "\(value)")
        }
        let task = self.task
        let (body, continuation) = TransportBody.makeStream {
            // The consumer stopped early (size limit, redirect, cancellation): stop the transfer.
            task.cancel()
        }
        let head = state.withLock { state in
            state.body = continuation
            defer { state.head = nil }
            return state.head
        }
        head?.resume(returning: TransportResponse(status: http?.statusCode ?? 200, headers: headers, body: body))
    }

    func cancel() {
        let (head, body) = state.withLock { state in
            defer { state.head = nil; state.body = nil; state.cancelled = true }
            return (state.head, state.body)
        }
        head?.resume(throwing: DepotError(.cancelled))
        body?.finish(throwing: DepotError(.cancelled))
        task.cancel()
    }

    func received(_ data: Data) {
        // URLSession cannot be paced by the consumer; past the limit, stop receiving
        // so an endless body cannot fill memory. The pipeline reports `.tooLarge`.
        let (body, over) = state.withLock { state in
            state.received += data.count
            return (state.body, limit.map { state.received > $0 } ?? false)
        }
        body?.yield(data)
        if over {
            body?.finish()
            task.cancel()
        }
    }

    /// The server-trust hook refused the certificate: the task ends as cancelled,
    /// and is reported as refused.
    func refusedServerTrust() {
        state.withLock { $0.trustRefused = true }
    }

    func completed(_ error: (any Error)?) {
        let (head, body, trustRefused) = state.withLock { state in
            defer { state.head = nil; state.body = nil }
            return (state.head, state.body, state.trustRefused)
        }
        if let error {
            let mapped = trustRefused
                ? DepotError(.transport, detail: URLSessionTransport.refusedDetail, underlying: error)
                : URLSessionTransport.map(error)
            head?.resume(throwing: mapped)
            body?.finish(throwing: mapped)
        } else {
            head?.resume(throwing: DepotError(.connectionLost, detail: "no response"))
            body?.finish()
        }
    }
}

/// Routes URLSession's callbacks to the exchange of each task.
///
/// `@unchecked Sendable` is sound: NSObject subclasses cannot be checked, and the
/// stored properties are a `Mutex` and an immutable `@Sendable` closure.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let exchanges = Mutex<[Int: Exchange]>([:])
    private let serverTrust: (@Sendable (URLSessionTransport.ServerTrustChallenge) -> URLSessionTransport.ServerTrustDecision)?

    init(serverTrust: (@Sendable (URLSessionTransport.ServerTrustChallenge) -> URLSessionTransport.ServerTrustDecision)?) {
        self.serverTrust = serverTrust
    }

    func register(_ exchange: Exchange, for identifier: Int) {
        exchanges.withLock { $0[identifier] = exchange }
    }

    private func exchange(for task: URLSessionTask) -> Exchange? {
        exchanges.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse, completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        exchange(for: dataTask)?.received(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchange(for: dataTask)?.received(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        // The controller follows redirects itself, by the same rules for every transport.
        completionHandler(nil)
    }

    // Task-level, not session-level: without a session-level method, URLSession
    // hands connection challenges (server trust among them) to this one, and the
    // task tells whose request a refusal fails.
    func urlSession(_ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge, completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void) {
        let (disposition, credential) = URLSessionTransport.answer(challenge.protectionSpace, hook: serverTrust)
        if disposition == .cancelAuthenticationChallenge {
            exchange(for: task)?.refusedServerTrust()
        }
        completionHandler(disposition, credential)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let exchange = exchanges.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        exchange?.completed(error)
    }
}
