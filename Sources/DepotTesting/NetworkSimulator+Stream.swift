import Depot
import Foundation

extension NetworkSimulator {
    /// What a streamed route sends on one connection: a response head, then
    /// chunks at scripted simulated times, then a close, a drop, or nothing
    /// (the connection stays open), as a server-sent events endpoint does.
    ///
    /// Each step waits its `after` from the step before it; the first waits
    /// from the moment the response head reaches the client. Steps are asked
    /// for one at a time, when the one before is due, so a script of a
    /// million events never holds more than one of them:
    ///
    /// ```swift
    /// let events = NetworkSimulator.Route(path: "/events") { request in
    ///     let resumeAfter = Int(request.headers["Last-Event-ID"] ?? "") ?? 0
    ///     return NetworkSimulator.StreamScript { index in
    ///         guard index < 1_000_000 else { return .drop() }
    ///         let id = resumeAfter + index + 1
    ///         return .send("id: \(id)\ndata: tick \(id)\n\n", after: .milliseconds(10))
    ///     }
    /// }
    /// ```
    ///
    /// Chunks bypass the link model: they arrive at their scripted times
    /// whatever the bandwidth, the bottleneck queue or the other transfers
    /// (an event stream is a trickle, bounded by latency, not bandwidth). The
    /// head still takes the round trip plus the route's latency, the
    /// timeline's offline spells still cut the stream
    /// (``/Depot/DepotError/Code/connectionLost``, after the chunks already
    /// arrived) and refuse new connections (``/Depot/DepotError/Code/offline``),
    /// and a route's scripted ``Failure``s come first, as for any route.
    public struct StreamScript: Sendable {
        /// One thing the server does on the connection, `after` the step before.
        public struct Step: Sendable, Hashable {
            enum Kind: Sendable, Hashable {
                case send(Data)
                case close
                case drop
            }

            let kind: Kind
            /// The simulated time from the step before (the first: from the response head).
            public var after: Duration

            /// The server sends `data`: it reaches the client as one chunk.
            ///
            /// For example: `.send(Data("data: x\n\n".utf8), after: .seconds(1))`.
            ///
            /// - Parameters:
            ///   - data: The chunk.
            ///   - delay: The time from the step before (0).
            public static func send(_ data: Data, after delay: Duration = .zero) -> Step {
                Step(kind: .send(data), after: max(.zero, delay))
            }

            /// The server sends `text` as UTF-8.
            ///
            /// For example: `.send("id: 1\ndata: x\n\n", after: .seconds(1))`.
            ///
            /// - Parameters:
            ///   - text: The chunk's text.
            ///   - delay: The time from the step before (0).
            public static func send(_ text: String, after delay: Duration = .zero) -> Step {
                send(Data(text.utf8), after: delay)
            }

            /// The server ends the response cleanly: the body ends after the chunks sent.
            ///
            /// For example: `.close(after: .seconds(5))`.
            ///
            /// - Parameter delay: The time from the step before (0).
            public static func close(after delay: Duration = .zero) -> Step {
                Step(kind: .close, after: max(.zero, delay))
            }

            /// The connection breaks: after the chunks sent, reading fails with
            /// ``/Depot/DepotError/Code/connectionLost``.
            ///
            /// For example: `.drop(after: .seconds(5))`.
            ///
            /// - Parameter delay: The time from the step before (0).
            public static func drop(after delay: Duration = .zero) -> Step {
                Step(kind: .drop, after: max(.zero, delay))
            }
        }

        let status: Int
        let headers: HeaderFields
        let step: @Sendable (Int) -> Step?

        /// The default response headers: `Content-Type: text/event-stream`.
        public static let eventStreamHeaders: HeaderFields = ["Content-Type": "text/event-stream"]

        /// A script of `steps`, in order; after the last, unless it closes or
        /// drops, the connection stays open.
        ///
        /// For example:
        ///
        /// ```swift
        /// NetworkSimulator.StreamScript(steps: [.send("id: 1\ndata: x\n\n", after: .seconds(1)), .drop(after: .seconds(4))])
        /// ```
        ///
        /// - Parameters:
        ///   - status: The response status (200).
        ///   - headers: The response headers (``eventStreamHeaders``); no `Content-Length` is added.
        ///   - steps: What the server does, in order.
        public init(status: Int = 200, headers: HeaderFields = StreamScript.eventStreamHeaders, steps: [Step]) {
            self.init(status: status, headers: headers) { index in index < steps.count ? steps[index] : nil }
        }

        /// A script whose steps are made one at a time, when the one before is
        /// due: `step(n)` is the `n`th (from 0), and `nil` ends the script with
        /// the connection left open. The simulator calls it under its lock, in
        /// order, once per index: it must not call the simulator.
        ///
        /// For example, an event every second, for ever:
        ///
        /// ```swift
        /// NetworkSimulator.StreamScript { index in .send("data: \(index)\n\n", after: .seconds(1)) }
        /// ```
        ///
        /// - Parameters:
        ///   - status: The response status (200).
        ///   - headers: The response headers (``eventStreamHeaders``); no `Content-Length` is added.
        ///   - step: The step at an index, or `nil` after the last.
        public init(status: Int = 200, headers: HeaderFields = StreamScript.eventStreamHeaders, step: @escaping @Sendable (Int) -> Step?) {
            self.status = status
            self.headers = headers
            self.step = step
        }
    }
}

extension NetworkSimulator.Route {
    /// Makes a route that streams: every connection to it gets the script
    /// `stream` makes from its request (so a script can read `Last-Event-ID`).
    ///
    /// For example:
    ///
    /// ```swift
    /// NetworkSimulator.Route(path: "/events") { request in
    ///     NetworkSimulator.StreamScript(steps: [.send("id: 1\ndata: x\n\n", after: .seconds(1)), .drop(after: .seconds(5))])
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - path: An exact path, or a prefix followed by `*`.
    ///   - latency: Server time before the head (0).
    ///   - stream: The script for one connection; called under the simulator's
    ///     lock when the connection opens, so it must not call the simulator.
    public init(path: String, latency: Duration = .zero, stream: @escaping @Sendable (TransportRequest) -> NetworkSimulator.StreamScript) {
        self.init(path: path, bytes: 0, latency: latency)
        self.stream = stream
    }
}

/// A streamed transfer's script as it plays: the next step, and the chunks
/// that arrived and wait for the consumer.
struct StreamFlow {
    let script: NetworkSimulator.StreamScript
    /// How many steps the script has been asked for.
    var produced = 0
    /// The step due next and when; `nil` before the head, and once the script has ended.
    var next: (at: Duration, step: NetworkSimulator.StreamScript.Step)?
    /// Chunks arrived and not yet read, oldest first, from `first` on.
    var arrived: [Data] = []
    var first = 0
    /// Whether the server closed the response.
    var closed = false

    init(script: NetworkSimulator.StreamScript) {
        self.script = script
    }

    /// Asks the script for its next step, due `after` it from `time`.
    mutating func fetch(from time: Duration) {
        next = script.step(produced).map { (time + $0.after, $0) }
        produced += 1
    }

    mutating func takeArrived() -> Data? {
        guard first < arrived.count else { return nil }
        let chunk = arrived[first]
        first += 1
        if first == arrived.count {
            arrived.removeAll(keepingCapacity: true)
            first = 0
        }
        return chunk
    }
}

extension LinkModel {
    /// When the next step of any playing stream is due.
    func nextStreamEventTime() -> Duration? {
        transfers.values.compactMap { transfer -> Duration? in
            guard case .body = transfer.phase, let at = transfer.stream?.next?.at else { return nil }
            return max(at, time)
        }.min()
    }

    /// Plays the steps of `transfer`'s stream due by now.
    mutating func playSteps(_ transfer: inout Transfer) {
        guard var flow = transfer.stream, case .body = transfer.phase else { return }
        if flow.produced == 0 { flow.fetch(from: time) }
        while let (at, step) = flow.next, at <= time {
            version += 1
            switch step.kind {
            case .send(let data):
                flow.arrived.append(data)
                flow.fetch(from: at)
            case .close:
                flow.closed = true
                flow.next = nil
                records[transfer.id - 1].lastByte = time
            case .drop:
                flow.next = nil
                transfer.phase = .failed(DepotError(.connectionLost, detail: "simulated stream dropped"))
            }
        }
        transfer.stream = flow
    }

    /// The next chunk of a streamed transfer, its end, its failure, or `nil` to wait.
    mutating func takeStreamChunk(_ id: Int) -> Result<Data?, any Error>? {
        guard var transfer = transfers[id], var flow = transfer.stream else { return nil }
        if let chunk = flow.takeArrived() {
            transfer.stream = flow
            transfer.delivered += chunk.count
            transfers[id] = transfer
            records[id - 1].bytes = transfer.delivered
            return .success(chunk)
        }
        if flow.closed {
            close(id, outcome: .completed)
            return .success(nil)
        }
        if case .failed(let error) = transfer.phase {
            close(id, outcome: .failed(error.code))
            return .failure(error)
        }
        return nil
    }
}
