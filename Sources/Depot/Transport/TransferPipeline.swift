import Foundation

/// The rules every transport obeys, applied in one place: redirects, the body
/// size limit, timeouts, truncation checks, progress and transfer samples.
struct TransferPipeline: Sendable {
    let transport: any Transport
    let timebase: Timebase
    let maximumBodySize: Int
    let redirectLimit: Int
    let watch: DeadlineWatch
    /// Writes the URLs in error details, and names the headers a redirect to another origin drops.
    let redaction: Redaction

    init(transport: any Transport, timebase: Timebase, maximumBodySize: Int, redirectLimit: Int, watch: DeadlineWatch? = nil, redaction: Redaction = .default) {
        self.transport = transport
        self.timebase = timebase
        self.maximumBodySize = maximumBodySize
        self.redirectLimit = redirectLimit
        self.watch = watch ?? DeadlineWatch(timebase: timebase)
        self.redaction = redaction
    }

    struct Result: Sendable {
        var response: NetworkResponse
        var sample: TransferSample
        /// Where the body went instead of `response.body`, if it was streamed.
        var sink: (any ResponseBodySink)? = nil
    }

    /// Chooses where an accepted body goes as it arrives (see
    /// ``StreamingNetworkOperation``), given the head as a response with an
    /// empty body; `nil` buffers it.
    typealias SinkChooser = @Sendable (NetworkResponse) async throws -> (any ResponseBodySink)?

    /// Sends `request`, follows redirects and collects the body, in the calling task.
    ///
    /// When a timeout expires, `cancelOnTimeout` is called; it must cancel the task
    /// that is running this call (the controller cancels the job's task). The
    /// cancellation is then reported as ``DepotError/Code/timedOut``.
    ///
    /// A 2xx body (not HEAD, 204 or 304) goes to the sink `chooseSink` gives,
    /// if any, instead of into `response.body`: each chunk is awaited there
    /// before the next one is read. A failure after the sink was chosen
    /// reaches its ``ResponseBodySink/fail(_:)`` before this throws.
    ///
    /// - Parameters:
    ///   - ranges: Fetches a `GET` in byte ranges (see ``DelayablePacing``);
    ///     the body still arrives as one.
    ///   - limitsStreamedBody: Whether a body that goes to a sink counts
    ///     against the size limit. A long-lived stream's does not: its sink
    ///     bounds the memory, and the stream never ends by itself.
    ///   - onHead: Called once, with the time it arrived, for the head whose
    ///     body is read (not for a redirect's).
    ///   - onProgress: Called for every chunk.
    func run(
        _ request: TransportRequest,
        timeout: Timeout,
        streamingTo chooseSink: SinkChooser? = nil,
        inRanges ranges: Ranges? = nil,
        limitsStreamedBody: Bool = true,
        cancelOnTimeout: @escaping @Sendable () -> Void,
        onHead: @Sendable (Duration) -> Void = { _ in },
        onProgress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> Result {
        let key = watch.register(timeout: timeout, onExpire: cancelOnTimeout)
        defer { watch.remove(key) }
        var sink: (any ResponseBodySink)?
        do {
            let result = try await transfer(request, watching: key, chooseSink: chooseSink, ranges: ranges, limitsStreamedBody: limitsStreamedBody, sink: &sink, onHead: onHead, onProgress: onProgress)
            // The body is complete. A timeout that fired at this very instant
            // either came first (then the job is being cancelled: report the
            // timeout, and nothing is processed) or comes too late to cancel
            // anything: a success is never turned into a cancellation.
            guard key.finish() else { throw key.expiry ?? DepotError(.timedOut) }
            return result
        } catch {
            let failure = key.expiry ?? error
            if let sink { await sink.fail(DepotError.wrap(failure, operation: nil, fallback: .transport)) }
            throw failure
        }
    }

    /// Sends `request` in a task of its own, so a timeout can stop it without
    /// cancelling the caller. Cancelling the caller cancels the transfer.
    func run(
        _ request: TransportRequest,
        timeout: Timeout,
        onProgress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> Result {
        let handle = Locked<Task<Result, any Error>?>(nil)
        let task = Task {
            try await self.run(request, timeout: timeout, cancelOnTimeout: { handle.value?.cancel() }, onProgress: onProgress)
        }
        handle.value = task
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }

    private func transfer(
        _ original: TransportRequest,
        watching key: DeadlineWatch.Key,
        chooseSink: SinkChooser?,
        ranges: Ranges?,
        limitsStreamedBody: Bool,
        sink: inout (any ResponseBodySink)?,
        onHead: @Sendable (Duration) -> Void,
        onProgress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> Result {
        var request = original
        // Without a limit a transport that cannot pace reading (URLSession)
        // keeps what arrives ahead of the sink; a stream's events are small.
        request.maximumBodySize = limitsStreamedBody || chooseSink == nil ? maximumBodySize : nil
        // The first range's last byte, while the request asks for one.
        var askedEnd: Int64?
        if let ranges {
            askedEnd = Int64(max(1, ranges.size(nil))) - 1
            request.headers["Range"] = "bytes=0-\(askedEnd!)"
        }
        var redirects = 0
        while true {
            let sent = timebase.now()
            var head = try await transport.send(request)
            let firstByte = timebase.now()
            watch.touch(key, at: firstByte)

            if let next = try redirectTarget(of: head, for: request) {
                redirects += 1
                if redirects > redirectLimit {
                    throw DepotError(.tooManyRedirects, status: head.status, detail: "more than \(redirectLimit), last to \(redaction.url(next.url))")
                }
                request = next
                continue  // Dropping `head.body` here stops that transfer.
            }
            if let ranges, let end = askedEnd {
                switch try firstRange(head, of: request, askedEnd: end, ranges: ranges, watching: key) {
                case .use(let joined):
                    head = joined
                case .askWhole:
                    head.body.cancel()
                    request.headers.remove(name: "Range")
                    askedEnd = nil
                    continue
                }
            }

            // A compressed body is decoded by some transports (URLSession), so its
            // Content-Length says nothing about the bytes we will see. Nor does it
            // for a response that has no body: HEAD, 204 and 304 (it sizes the resource).
            let encoded = head.isEncoded
            let hasBody = request.method != .head && head.status != 204 && head.status != 304
            let expected = encoded || !hasBody ? nil : head.expectedLength
            if let expected, expected > Int64(maximumBodySize) {
                throw DepotError(.tooLarge, status: head.status, detail: "Content-Length \(expected) over the limit of \(maximumBodySize) bytes")
            }
            onHead(firstByte)
            if hasBody, (200..<300).contains(head.status), let chooseSink,
               let chosen = try await chooseSink(NetworkResponse(status: head.status, headers: head.headers, url: request.url)) {
                sink = chosen
                return try await stream(head, of: request, expected: expected, into: chosen, limit: limitsStreamedBody ? Int64(maximumBodySize) : nil, watching: key, sent: sent, firstByte: firstByte, onProgress: onProgress)
            }
            var body = Data()
            for try await chunk in head.body {
                if body.count + chunk.count > maximumBodySize {
                    throw DepotError(.tooLarge, status: head.status, detail: "more than the limit of \(maximumBodySize) bytes")
                }
                if body.isEmpty, chunk.startIndex == 0 {
                    // The first chunk is kept as it is, so a body that arrives in one
                    // chunk (most small responses) is neither allocated again nor copied.
                    // (Not a slice: a body's indices start at 0, as they always have.)
                    body = chunk
                    if let expected, expected > Int64(chunk.count) { body.reserveCapacity(Int(expected)) }
                } else {
                    if body.isEmpty, let expected { body.reserveCapacity(Int(expected)) }
                    body.append(chunk)
                }
                watch.touch(key)
                onProgress(TransferProgress(received: Int64(body.count), expected: expected))
            }
            // A cancelled consumer sees the stream end early; that is not a complete body.
            try Task.checkCancellation()
            let finished = timebase.now()
            if let expected, Int64(body.count) < expected {
                throw DepotError(.connectionLost, status: head.status, detail: "body truncated after \(body.count) of \(expected) bytes")
            }
            let response = NetworkResponse(status: head.status, headers: head.headers, body: body, url: request.url)
            let sample = TransferSample(bytes: Int64(body.count), timeToFirstByte: firstByte - sent, transferDuration: finished - firstByte)
            return Result(response: response, sample: sample)
        }
    }

    /// Hands the body of `head` to `sink` chunk by chunk, under the same rules
    /// as a buffered body. While the sink takes a chunk, the idle deadline
    /// waits: the network is not what is slow. A sink that throws stops the
    /// transfer, and the result says what arrived until then.
    private func stream(
        _ head: TransportResponse,
        of request: TransportRequest,
        expected: Int64?,
        into sink: any ResponseBodySink,
        limit: Int64?,
        watching key: DeadlineWatch.Key,
        sent: Duration,
        firstByte: Duration,
        onProgress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> Result {
        var received: Int64 = 0
        var stopped = false
        for try await chunk in head.body {
            if let limit, received + Int64(chunk.count) > limit {
                throw DepotError(.tooLarge, status: head.status, detail: "more than the limit of \(maximumBodySize) bytes")
            }
            received += Int64(chunk.count)
            watch.touch(key)
            onProgress(TransferProgress(received: received, expected: expected))
            watch.pause(key)
            do {
                try await sink.receive(chunk)
            } catch {
                // A sink stopped by the transfer's cancellation (a timeout) is the transfer's failure.
                try Task.checkCancellation()
                stopped = true
            }
            watch.resume(key)
            if stopped { break }
        }
        // A cancelled consumer sees the stream end early; that is not a complete body.
        try Task.checkCancellation()
        let finished = timebase.now()
        if !stopped, let expected, received < expected {
            throw DepotError(.connectionLost, status: head.status, detail: "body truncated after \(received) of \(expected) bytes")
        }
        let response = NetworkResponse(status: head.status, headers: head.headers, url: request.url)
        let sample = TransferSample(bytes: received, timeToFirstByte: firstByte - sent, transferDuration: finished - firstByte)
        return Result(response: response, sample: sample, sink: sink)
    }

    /// The request to send next if `head` is a redirect Depot follows, else `nil`.
    func redirectTarget(of head: TransportResponse, for request: TransportRequest) throws -> TransportRequest? {
        guard redirectLimit > 0, [301, 302, 303, 307, 308].contains(head.status),
              let location = head.headers["Location"]
        else { return nil }
        guard let target = URL(string: location, relativeTo: request.url)?.absoluteURL, target.scheme != nil else {
            throw DepotError(.invalidRequest, status: head.status, detail: "bad redirect Location \"\(redaction.text(location))\"")
        }
        let fromScheme = request.url.scheme?.lowercased()
        let toScheme = target.scheme?.lowercased()
        if fromScheme == "https" && toScheme == "http" {
            throw DepotError(.insecureRedirect, status: head.status, detail: "\(redaction.url(request.url)) → \(redaction.url(target))")
        }
        guard toScheme == "http" || toScheme == "https" else {
            throw DepotError(.invalidRequest, status: head.status, detail: "redirect to unsupported scheme \(toScheme ?? "none")")
        }
        var next = request
        next.url = target
        if Origin(target) != Origin(request.url) {
            for field in request.headers where HeaderFields.credentialNames.contains(field.name.lowercased()) || redaction.isSecret(headerName: field.name) {
                next.headers.remove(name: field.name)
            }
        }
        let becomesGET = head.status == 303 && request.method != .head
            || (head.status == 301 || head.status == 302) && request.method == .post
        if becomesGET {
            next.method = .get
            next.body = nil
            next.headers.remove(name: "Content-Type")
            next.headers.remove(name: "Content-Length")
        }
        return next
    }
}
