import Foundation
import Synchronization

/// The rules every transport obeys, applied in one place: redirects, the body
/// size limit, timeouts, truncation checks, progress and transfer samples.
struct TransferPipeline: Sendable {
    let transport: any Transport
    let timebase: Timebase
    let maximumBodySize: Int
    let redirectLimit: Int

    struct Result: Sendable {
        var response: Response
        var sample: TransferSample
    }

    /// Sends `request`, follows redirects and collects the body.
    ///
    /// - Parameter onProgress: Called for every chunk.
    func run(
        _ request: TransportRequest,
        timeout: Timeout,
        onProgress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> Result {
        let activity = Locked(timebase.now())
        let timebase = self.timebase
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                try await self.transfer(request, activity: activity, onProgress: onProgress)
            }
            group.addTask {
                try await Self.watchdog(timeout: timeout, activity: activity, timebase: timebase)
                return nil
            }
            defer { group.cancelAll() }
            while let next = try await group.next() {
                if let result = next { return result }
            }
            throw CancellationError()
        }
    }

    /// Throws `.timedOut` once no byte has arrived for `timeout.idle`, or the
    /// whole transfer has taken longer than `timeout.total`.
    private static func watchdog(timeout: Timeout, activity: Locked<Duration>, timebase: Timebase) async throws {
        let start = timebase.now()
        let totalDeadline = timeout.total.map { start + $0 }
        while true {
            let idleDeadline = activity.withLock { $0 } + timeout.idle
            let deadline = totalDeadline.map { min($0, idleDeadline) } ?? idleDeadline
            try await timebase.sleepUntil(deadline)
            let now = timebase.now()
            if let totalDeadline, now >= totalDeadline {
                throw DepotError(.timedOut, detail: "\(timeout.total!) in total")
            }
            if now >= activity.withLock({ $0 }) + timeout.idle {
                throw DepotError(.timedOut, detail: "\(timeout.idle) without a byte")
            }
        }
    }

    private func transfer(
        _ original: TransportRequest,
        activity: Locked<Duration>,
        onProgress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> Result {
        var request = original
        request.maximumBodySize = maximumBodySize
        var redirects = 0
        while true {
            let sent = timebase.now()
            let head = try await transport.send(request)
            let firstByte = timebase.now()
            activity.withLock { $0 = firstByte }

            if let next = try redirectTarget(of: head, for: request) {
                redirects += 1
                if redirects > redirectLimit {
                    throw DepotError(.tooManyRedirects, status: head.status, detail: "more than \(redirectLimit), last to \(next.url.absoluteString)")
                }
                request = next
                continue  // Dropping `head.body` here stops that transfer.
            }

            // A compressed body is decoded by some transports (URLSession), so its
            // Content-Length says nothing about the bytes we will see.
            let encoded = head.headers["Content-Encoding"].map { $0.lowercased() != "identity" } ?? false
            let expected = encoded ? nil : head.expectedLength
            if let expected, expected > Int64(maximumBodySize) {
                throw DepotError(.tooLarge, status: head.status, detail: "Content-Length \(expected) over the limit of \(maximumBodySize) bytes")
            }
            var body = Data()
            if let expected { body.reserveCapacity(Int(expected)) }
            for try await chunk in head.body {
                if body.count + chunk.count > maximumBodySize {
                    throw DepotError(.tooLarge, status: head.status, detail: "more than the limit of \(maximumBodySize) bytes")
                }
                body.append(chunk)
                activity.withLock { $0 = timebase.now() }
                onProgress(TransferProgress(received: Int64(body.count), expected: expected))
            }
            // A cancelled consumer sees the stream end early; that is not a complete body.
            try Task.checkCancellation()
            let finished = timebase.now()
            if let expected, Int64(body.count) < expected, request.method != .head, head.status != 204, head.status != 304 {
                throw DepotError(.connectionLost, status: head.status, detail: "body truncated after \(body.count) of \(expected) bytes")
            }
            let response = Response(status: head.status, headers: head.headers, body: body, url: request.url)
            let sample = TransferSample(bytes: Int64(body.count), timeToFirstByte: firstByte - sent, transferDuration: finished - firstByte)
            return Result(response: response, sample: sample)
        }
    }

    /// The request to send next if `head` is a redirect Depot follows, else `nil`.
    func redirectTarget(of head: TransportResponse, for request: TransportRequest) throws -> TransportRequest? {
        guard redirectLimit > 0, [301, 302, 303, 307, 308].contains(head.status),
              let location = head.headers["Location"]
        else { return nil }
        guard let target = URL(string: location, relativeTo: request.url)?.absoluteURL, target.scheme != nil else {
            throw DepotError(.invalidRequest, status: head.status, detail: "bad redirect Location \"\(location)\"")
        }
        let fromScheme = request.url.scheme?.lowercased()
        let toScheme = target.scheme?.lowercased()
        if fromScheme == "https" && toScheme == "http" {
            throw DepotError(.insecureRedirect, status: head.status, detail: "\(request.url.absoluteString) → \(target.absoluteString)")
        }
        guard toScheme == "http" || toScheme == "https" else {
            throw DepotError(.invalidRequest, status: head.status, detail: "redirect to unsupported scheme \(toScheme ?? "none")")
        }
        var next = request
        next.url = target
        if Origin(target) != Origin(request.url) {
            for name in HTTPHeaders.credentialNames { next.headers.remove(name: name) }
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
