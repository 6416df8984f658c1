import Depot
import Foundation

/// The link's state and arithmetic, with no clock and no tasks: the simulator
/// calls it under its lock with the current time and runs the effects it returns.
struct LinkModel {
    typealias Record = NetworkSimulator.Record

    enum Waiter {
        case head(CheckedContinuation<Void, any Error>)
        case chunk(CheckedContinuation<Data?, any Error>)
    }

    enum Effect {
        case resumeHead(CheckedContinuation<Void, any Error>, Result<Void, any Error>)
        case resumeChunk(CheckedContinuation<Data?, any Error>, Result<Data?, any Error>)
    }

    enum Phase {
        /// Waiting for the response head, due at `headAt`.
        case head
        /// The body is flowing (or fully received, when `received == size`).
        case body
        /// The link broke; the consumer gets `error` on its next call.
        case failed(DepotError)
    }

    struct Transfer {
        var id: Int
        var status: Int
        var headers: HeaderFields
        var content: Data?
        /// The body size the server sends.
        var size: Int
        /// Where the connection breaks, if it does.
        var breakAt: Int?
        var headAt: Duration
        var phase: Phase = .head
        var received: Double = 0
        var delivered = 0
        var waiter: Waiter?
        /// With a bottleneck queue: bytes the server has not yet put into it.
        var unsent: Double = 0
        /// With a bottleneck queue: whether the server has started answering.
        var answering = false
        /// For a streamed route: its script as it plays (it bypasses shares and the queue).
        var stream: StreamFlow?

        /// Bytes that will arrive before the transfer ends (or breaks).
        var limit: Int { breakAt.map { min($0, size) } ?? size }
        var isFlowing: Bool {
            if stream != nil { return false }
            if case .body = phase { return received < Double(limit) }
            return false
        }
    }

    var time: Duration = .zero
    private(set) var link: NetworkSimulator.Link
    private(set) var online = true
    let routes: [NetworkSimulator.Route]
    private var failuresUsed: [Int: Int] = [:]
    private let timeline: [NetworkSimulator.Change]
    private var nextChange = 0
    let chunkSize: Int
    var transfers: [Int: Transfer] = [:]
    var records: [Record] = []
    private var effects: [Effect] = []
    /// Bumped by every change, so a driver can tell whether anything moved.
    var version: UInt64 = 0
    /// The bottleneck's queue, when the link has one (``NetworkSimulator/Link/queue``).
    var bottleneck: Bottleneck?

    /// Bytes within this of a boundary count as there (floating point).
    static let epsilon = 1e-3

    init(link: NetworkSimulator.Link, routes: [NetworkSimulator.Route], timeline: [NetworkSimulator.Change], chunkSize: Int) {
        self.link = link
        self.routes = routes
        // Stable: changes at the same time apply in the order given.
        self.timeline = timeline.enumerated().sorted { ($0.element.at, $0.offset) < ($1.element.at, $1.offset) }.map(\.element)
        self.chunkSize = chunkSize
        if let capacity = link.queue { bottleneck = Bottleneck(capacity: Double(capacity)) }
        applyChanges()
    }

    mutating func takeEffects() -> [Effect] {
        defer { effects = [] }
        return effects
    }

    /// Whether every open transfer's consumer is suspended waiting on the model.
    var allParked: Bool { transfers.values.allSatisfy { $0.waiter != nil } }

    // MARK: Transfers

    mutating func open(method: NetworkRequest.Method, path: String, ifNoneMatch: String? = nil, range: String? = nil, ifRange: String? = nil, request: TransportRequest? = nil) -> Result<Int, DepotError> {
        version += 1
        let id = records.count + 1
        var record = Record(id: id, method: method, path: path, status: nil, started: time, firstByte: nil, lastByte: nil, ended: nil, bytes: 0, outcome: nil)
        guard online else {
            record.ended = time
            record.outcome = .failed(.offline)
            records.append(record)
            return .failure(DepotError(.offline, detail: "simulated link offline"))
        }
        let routeIndex = routes.firstIndex { $0.matches(path) }
        var status = 404, headers: HeaderFields = [:], size = 0, latency: Duration = .zero, content: Data? = nil, breakAt: Int?
        var stream: StreamFlow?
        if let routeIndex {
            let route = routes[routeIndex]
            (status, headers, size, latency, content) = (route.status, route.headers, route.bytes, route.latency, route.body)
            let used = failuresUsed[routeIndex, default: 0]
            if used < route.failures.count {
                failuresUsed[routeIndex] = used + 1
                switch route.failures[used].kind {
                case .refused:
                    record.ended = time
                    record.outcome = .failed(.offline)
                    records.append(record)
                    return .failure(DepotError(.offline, detail: "simulated connection refused"))
                case .status(let failedStatus, let failedHeaders, let bytes):
                    (status, headers, size, content) = (failedStatus, failedHeaders, bytes, nil)
                case .connectionLost(let bytes):
                    breakAt = bytes
                }
            } else if let makeScript = route.stream, let request, method != .head {
                let script = makeScript(request)
                (status, headers) = (script.status, script.headers)
                stream = StreamFlow(script: script)
            }
        }
        if let stream {
            records.append(record)
            var transfer = Transfer(id: id, status: status, headers: headers, content: nil, size: 0, breakAt: nil, headAt: time + link.rtt + latency)
            transfer.stream = stream
            transfers[id] = transfer
            return .success(id)
        }
        if status == 200, method == .get || method == .head, let etag = headers["ETag"], let ifNoneMatch,
           Self.listsETag(ifNoneMatch, etag) {
            // What an HTTP server does: the client's copy is current.
            (status, size, content) = (304, 0, nil)
        }
        if status == 200, method == .get, breakAt == nil, let range, let etag = headers["ETag"], etag.hasPrefix("\""),
           ifRange == nil || ifRange == etag, let (first, last) = Self.byteRange(range), first < size {
            // What an HTTP server with a strong validator does with `Range: bytes=a-b`.
            let end = min(last, size - 1)
            headers["Content-Range"] = "bytes \(first)-\(end)/\(size)"
            headers["Content-Length"] = nil
            content = content.map { Data($0[$0.startIndex + first ... $0.startIndex + end]) }
            (status, size) = (206, end - first + 1)
        }
        if headers["Content-Length"] == nil || status == 304 { headers["Content-Length"] = String(size) }
        if method == .head { size = 0 }
        records.append(record)
        var transfer = Transfer(id: id, status: status, headers: headers, content: content, size: size, breakAt: breakAt, headAt: time + link.rtt + latency)
        transfer.unsent = Double(transfer.limit)
        transfers[id] = transfer
        return .success(id)
    }

    /// `bytes=first-last` as offsets; `nil` for any other form.
    static func byteRange(_ value: String) -> (Int, Int)? {
        guard value.hasPrefix("bytes=") else { return nil }
        let bounds = value.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int(bounds[0]), let last = Int(bounds[1]), first >= 0, first <= last else { return nil }
        return (first, last)
    }

    /// Whether an `If-None-Match` value names `etag` (or is `*`), comparing
    /// weakly as RFC 9110 asks for `If-None-Match`.
    static func listsETag(_ ifNoneMatch: String, _ etag: String) -> Bool {
        func opaque(_ tag: Substring) -> Substring {
            let trimmed = tag.trimmingCharacters(in: .whitespaces)[...]
            return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed
        }
        let own = opaque(etag[...])
        return ifNoneMatch.split(separator: ",").contains { candidate in
            let tag = opaque(candidate)
            return tag == "*" || tag == own
        }
    }

    func head(of id: Int) -> (Int, HeaderFields) {
        let record = records[id - 1]
        return (record.status ?? 0, transfers[id]?.headers ?? [:])
    }

    mutating func awaitHead(_ id: Int, _ continuation: CheckedContinuation<Void, any Error>) -> Result<Void, any Error>? {
        version += 1
        guard var transfer = transfers[id] else { return .failure(endedError(id)) }
        switch transfer.phase {
        case .head:
            transfer.waiter = .head(continuation)
            transfers[id] = transfer
            return nil
        case .body:
            return .success(())
        case .failed(let error):
            close(id, outcome: .failed(error.code))
            return .failure(error)
        }
    }

    mutating func awaitChunk(_ id: Int, _ continuation: CheckedContinuation<Data?, any Error>) -> Result<Data?, any Error>? {
        version += 1
        guard transfers[id] != nil else { return .failure(endedError(id)) }
        if let ready = takeChunk(id) { return ready }
        transfers[id]?.waiter = .chunk(continuation)
        return nil
    }

    /// The next chunk of `id` if one can be handed out now, the end, or its failure.
    private mutating func takeChunk(_ id: Int) -> Result<Data?, any Error>? {
        guard var transfer = transfers[id] else { return nil }
        if transfer.stream != nil { return takeStreamChunk(id) }
        if transfer.delivered >= transfer.size {
            close(id, outcome: .completed)
            return .success(nil)
        }
        let length = min(chunkSize, transfer.size - transfer.delivered)
        let boundary = transfer.delivered + length
        if boundary <= transfer.limit, transfer.received + Self.epsilon >= Double(boundary) {
            let chunk = transfer.content.map { Data($0[$0.startIndex + transfer.delivered ..< $0.startIndex + boundary]) } ?? Data(count: length)
            transfer.delivered = boundary
            transfers[id] = transfer
            records[id - 1].bytes = boundary
            return .success(chunk)
        }
        if case .failed(let error) = transfer.phase {
            close(id, outcome: .failed(error.code))
            return .failure(error)
        }
        return nil
    }

    /// Ends a transfer: its share is freed and a waiting consumer is told.
    mutating func close(_ id: Int, outcome: Record.Outcome) {
        guard let transfer = transfers.removeValue(forKey: id) else { return }
        version += 1
        records[id - 1].ended = time
        records[id - 1].outcome = outcome
        let error: DepotError
        switch outcome {
        case .completed: return
        case .cancelled: error = DepotError(.cancelled)
        case .failed(let code): error = DepotError(code)
        }
        switch transfer.waiter {
        case .head(let continuation)?: effects.append(.resumeHead(continuation, .failure(error)))
        case .chunk(let continuation)?: effects.append(.resumeChunk(continuation, .failure(error)))
        case nil: break
        }
    }

    private func endedError(_ id: Int) -> DepotError {
        switch records[id - 1].outcome {
        case .failed(let code)?: return DepotError(code)
        default: return DepotError(.cancelled)
        }
    }

    // MARK: Time

    /// The earliest time something a consumer waits for happens, or a scripted change.
    func nextEventTime() -> Duration? {
        var next: Duration? = nextChange < timeline.count ? timeline[nextChange].at : nil
        if let streamed = nextStreamEventTime() { next = min(next ?? streamed, streamed) }
        if bottleneck != nil {
            if let queued = nextQueueEventTime() { next = min(next ?? queued, queued) }
            return next
        }
        func consider(_ t: Duration) { next = min(next ?? t, t) }
        let rate = shareRate
        for transfer in transfers.values {
            switch transfer.phase {
            case .head:
                consider(max(transfer.headAt, time))
            case .body where transfer.isFlowing && rate > 0:
                // The consumer's next chunk boundary, and the end of the flow (shares change then).
                let target = min(transfer.limit, transfer.delivered + chunkSize)
                if Double(target) > transfer.received + Self.epsilon {
                    consider(time + Self.duration(seconds: (Double(target) - transfer.received) / rate))
                }
                consider(time + Self.duration(seconds: (Double(transfer.limit) - transfer.received) / rate))
            default:
                break
            }
        }
        return next
    }

    /// Bytes per second each flowing transfer gets.
    private var shareRate: Double {
        let flows = transfers.values.filter(\.isFlowing).count
        guard online, flows > 0 else { return 0 }
        return link.bandwidth / 8 / Double(flows)
    }

    /// Moves the model to `target`, integrating the flows between every change of shares.
    mutating func advance(to target: Duration) {
        guard target >= time else { return }
        if bottleneck != nil {
            advanceQueue(to: target)
            serveWaiters()
            return
        }
        repeat {
            var step = target
            if nextChange < timeline.count { step = min(step, timeline[nextChange].at) }
            for transfer in transfers.values {
                if case .head = transfer.phase { step = min(step, max(transfer.headAt, time)) }
            }
            if let streamed = nextStreamEventTime() { step = min(step, streamed) }
            let rate = shareRate
            if rate > 0 {
                for transfer in transfers.values where transfer.isFlowing {
                    step = min(step, time + Self.duration(seconds: (Double(transfer.limit) - transfer.received) / rate))
                }
            }
            if step > time {
                let seconds = (step - time).seconds
                for (id, var transfer) in transfers where transfer.isFlowing {
                    transfer.received = min(Double(transfer.limit), transfer.received + rate * seconds)
                    transfers[id] = transfer
                }
                time = step
                version += 1
            }
            settleEvents()
        } while time < target
        serveWaiters()
    }

    /// Applies what is due at `time`: scripted changes, heads, finished and broken flows.
    mutating func settleEvents() {
        applyChanges()
        for (id, var transfer) in transfers {
            if bottleneck == nil || transfer.stream != nil, case .head = transfer.phase, transfer.headAt <= time {
                headArrived(&transfer)
            }
            if transfer.stream != nil {
                playSteps(&transfer)
            } else if case .body = transfer.phase, transfer.received + Self.epsilon >= Double(transfer.limit) {
                transfer.received = Double(transfer.limit)
                if records[id - 1].lastByte == nil, transfer.limit == transfer.size {
                    records[id - 1].lastByte = time
                }
                if transfer.limit < transfer.size {
                    transfer.phase = .failed(DepotError(.connectionLost, detail: "simulated connection lost after \(transfer.limit) bytes"))
                }
            }
            transfers[id] = transfer
        }
    }

    /// The response head of `transfer` reached the client: its body may flow.
    mutating func headArrived(_ transfer: inout Transfer) {
        guard case .head = transfer.phase else { return }
        transfer.phase = .body
        records[transfer.id - 1].status = transfer.status
        records[transfer.id - 1].firstByte = time
        if case .head(let continuation)? = transfer.waiter {
            transfer.waiter = nil
            effects.append(.resumeHead(continuation, .success(())))
        }
        version += 1
    }

    private mutating func applyChanges() {
        while nextChange < timeline.count, timeline[nextChange].at <= time {
            switch timeline[nextChange].kind {
            case .bandwidth(let bandwidth): link.bandwidth = bandwidth
            case .rtt(let rtt): link.rtt = rtt
            case .online: online = true
            case .offline:
                online = false
                for (id, var transfer) in transfers {
                    // Bytes already received stay readable; the rest is lost.
                    if case .failed = transfer.phase { continue }
                    if transfer.stream?.closed == true { continue }
                    transfer.stream?.next = nil
                    if transfer.stream == nil, case .body = transfer.phase, transfer.received >= Double(transfer.size) { continue }
                    transfer.phase = .failed(DepotError(.connectionLost, detail: "simulated link went offline"))
                    transfer.breakAt = Int(transfer.received.rounded(.down))
                    transfer.unsent = 0
                    transfers[id] = transfer
                }
                // What the bottleneck held is lost with the link.
                bottleneck?.clear()
            }
            nextChange += 1
            version += 1
        }
    }

    /// Hands chunks, ends and failures to the consumers waiting for them.
    private mutating func serveWaiters() {
        for id in transfers.keys.sorted() {
            guard case .chunk(let continuation)? = transfers[id]?.waiter else { continue }
            transfers[id]?.waiter = nil
            if let result = takeChunk(id) {
                effects.append(.resumeChunk(continuation, result))
            } else {
                transfers[id]?.waiter = .chunk(continuation)
            }
        }
        for id in transfers.keys.sorted() {
            // A failed head wait ends here; close tells the waiter.
            guard let transfer = transfers[id], case .failed(let error) = transfer.phase, case .head? = transfer.waiter else { continue }
            close(id, outcome: .failed(error.code))
        }
    }

    /// A duration of `seconds`, rounded up to the nanosecond (at least 1 ns) so an
    /// event is never scheduled before its bytes are there.
    static func duration(seconds: Double) -> Duration {
        guard seconds.isFinite else { return .seconds(1_000_000_000) }
        return .nanoseconds(max(1, Int64((seconds * 1e9).rounded(.up))))
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
