import Depot
import Foundation
import Synchronization

/// A ``/Depot/Transport`` whose answers, and the moment each one goes, the
/// test decides: answers from a script (by path, or in order), a gate that
/// holds requests until the test opens it, a switch to go offline, and a
/// record of every request and what it got.
///
/// Where ``FixtureTransport`` serves canned files, this one serves what a test
/// about timing needs: a request still under way while the test acts (the
/// gate, and ``waitingAtGate(atLeast:timeout:)`` to know it is there), a
/// failure before a success, a body that streams, or a real server's answers
/// watched from the side (``init(forwardingTo:)``).
///
/// For example:
///
/// ```swift
/// let transport = ScriptedTransport()
/// transport.respond(to: "/contacts", with: .status(200, body: Data(#"{"items": []}"#.utf8)).gated)
/// let controller = NetworkController(configuration: .init(baseURL: api, transport: transport))
/// controller.enqueue(FetchContacts())
/// try await transport.waitingAtGate(atLeast: 1)   // the request is under way, held at the gate
/// #expect(controller.activity.running == 1)
/// transport.letThrough(1)
/// ```
///
/// A path with no answers of its own gets the transport's other answers
/// (``respondToOtherPaths(with:)``): 404 unless the script says otherwise.
/// Each wait fails with ``Recorder/Failure``, listing what the transport got,
/// after `timeout` of real time: a guard against a test that would hang.
public final class ScriptedTransport: Transport, Sendable {
    /// One request the transport got, and how it was answered.
    ///
    /// For example: `#expect(transport.exchanges.map(\.status) == [503, 200])`.
    public struct Exchange: Sendable, CustomStringConvertible {
        /// The request as the transport got it.
        public let request: TransportRequest
        /// The answer's status, once its head went back.
        public internal(set) var status: Int?
        /// What `send` threw, if it failed.
        public internal(set) var failure: (any Error)?
        /// When the request came, on the transport's own count, which moves
        /// by one for each request that comes and each answer that goes back.
        public let sentAt: Int
        /// When the answer (or the failure) went back, on the same count;
        /// `nil` while the request is under way.
        public internal(set) var answeredAt: Int?

        public var description: String {
            let what = "\(request.method) \(request.url.path)"
            if let status { return "\(what) → \(status)" }
            if let failure { return "\(what) → \(failure)" }
            return "\(what) → under way"
        }
    }

    /// Answers in order, the last one again and again.
    private struct Script {
        var answers: [Answer]
        var next = 0

        mutating func take() -> Answer {
            defer { next = min(next + 1, answers.count - 1) }
            return answers[next]
        }
    }

    private struct State {
        var byPath: [String: Script] = [:]
        var otherPaths: Script
        var isOffline = false
        var exchanges: [Exchange] = []
        /// The count ``Exchange/sentAt`` and ``Exchange/answeredAt`` read.
        var count = 0
        /// Requests waiting at the gate, oldest first, by exchange index.
        var atGate: [(exchange: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        /// Passes given while nobody waited: the next requests to come go through.
        var passes = 0
        var gateIsOpen = false
        /// Facts' waiters, told of every change.
        var watchers: [UInt64: AsyncStream<Void>.Continuation] = [:]
        var nextWatcher: UInt64 = 0

        var waitingAtGate: [TransportRequest] { atGate.map { exchanges[$0.exchange].request } }
    }

    private let state: Mutex<State>
    private let forwarded: (any Transport)?

    /// Makes a transport that answers every request with `answers`, in order,
    /// and with the last one again and again: 404 when `answers` is empty.
    ///
    /// For example: `ScriptedTransport(.status(503), .status(200))`.
    public init(_ answers: Answer...) {
        state = Mutex(State(otherPaths: Script(answers: answers.isEmpty ? [.status(404)] : answers)))
        forwarded = nil
    }

    /// Makes a transport that answers every request with what `respond` returns.
    ///
    /// For example:
    ///
    /// ```swift
    /// let transport = ScriptedTransport { request in
    ///     TransportResponse(status: request.method == .head ? 200 : 304, body: .empty)
    /// }
    /// ```
    public convenience init(respond: @escaping @Sendable (TransportRequest) async throws -> TransportResponse) {
        self.init(.respond(respond))
    }

    /// Makes a transport that hands every request to `transport` and records
    /// it with its answer; ``isOffline`` and answers by path still apply, and
    /// ``shutdown()`` shuts `transport` down.
    ///
    /// For example:
    ///
    /// ```swift
    /// let transport = ScriptedTransport(forwardingTo: URLSessionTransport())
    /// transport.isOffline = true   // as if the network went away
    /// ```
    public init(forwardingTo transport: any Transport) {
        state = Mutex(State(otherPaths: Script(answers: [Answer(kind: .forward(transport))])))
        forwarded = transport
    }

    /// Answers requests for `path` (the URL's path, without the query) with
    /// `answers` from now on, in order, and with the last one again and
    /// again; with no answers, the path gets the other paths' answers again.
    ///
    /// For example: `transport.respond(to: "/token", with: .status(401), .status(200))`.
    public func respond(to path: String, with answers: Answer...) {
        state.withLock { $0.byPath[path] = answers.isEmpty ? nil : Script(answers: answers) }
    }

    /// Answers requests for every path without answers of its own with
    /// `answers` from now on, in order, and with the last one again and again.
    ///
    /// For example: `transport.respondToOtherPaths(with: .status(200, body: Data("{}".utf8)))`.
    public func respondToOtherPaths(with answers: Answer...) {
        guard !answers.isEmpty else { return }
        state.withLock { $0.otherPaths = Script(answers: answers) }
    }

    /// Whether every request fails at once with ``/Depot/DepotError/Code/offline``,
    /// whatever the script says (it is recorded all the same).
    ///
    /// For example: `transport.isOffline = true`.
    public var isOffline: Bool {
        get { state.withLock { $0.isOffline } }
        set { state.withLock { $0.isOffline = newValue } }
    }

    /// Every request so far, in the order they came.
    ///
    /// For example: `#expect(transport.requests.map(\.url.path) == ["/contacts"])`.
    public var requests: [TransportRequest] { state.withLock { $0.exchanges.map(\.request) } }

    /// Every request so far with its answer, in the order they came.
    ///
    /// For example, that a send left only after the token's refresh was answered:
    ///
    /// ```swift
    /// let exchanges = transport.exchanges
    /// let refreshed = try #require(exchanges.first { $0.request.url.path == "/token" && $0.status == 200 }?.answeredAt)
    /// let send = try #require(exchanges.first { $0.request.method == .post })
    /// #expect(send.sentAt > refreshed)
    /// ```
    public var exchanges: [Exchange] { state.withLock { $0.exchanges } }

    /// The requests waiting at the gate now, the longest-waiting first.
    ///
    /// For example: `#expect(transport.waitingAtGate.isEmpty)`.
    public var waitingAtGate: [TransportRequest] { state.withLock { $0.waitingAtGate } }

    /// Lets `count` requests through the gate and keeps it shut behind them:
    /// the longest-waiting first; passes that no request waits for go to the
    /// next ones to come.
    ///
    /// For example: `transport.letThrough(1)`.
    public func letThrough(_ count: Int = 1) {
        let released = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            let released = state.atGate.prefix(max(0, count)).map(\.continuation)
            state.atGate.removeFirst(released.count)
            state.passes += max(0, count) - released.count
            return released
        }
        for continuation in released { continuation.resume() }
        changed()
    }

    /// Opens the gate for good: every request waiting at it goes on, and so
    /// does every later one.
    ///
    /// For example: `transport.openGate()`.
    public func openGate() {
        let released = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            state.gateIsOpen = true
            defer { state.atGate = [] }
            return state.atGate.map(\.continuation)
        }
        for continuation in released { continuation.resume() }
        changed()
    }

    /// Returns the requests so far once at least `count` have come.
    ///
    /// For example: `let first = try await transport.requests(atLeast: 1)[0]`.
    ///
    /// - Parameters:
    ///   - count: How many requests must have come.
    ///   - timeout: How long to wait, in real time, before failing (30 s).
    /// - Throws: ``Recorder/Failure`` when the time runs out first.
    @discardableResult
    public func requests(atLeast count: Int, timeout: Duration = .seconds(30)) async throws(Recorder<Void>.Failure) -> [TransportRequest] {
        try await wait(for: "\(count) requests", timeout: timeout) { state in
            state.exchanges.count >= count ? state.exchanges.map(\.request) : nil
        }
    }

    /// Returns the requests waiting at the gate once at least `count` wait
    /// there: the way a test knows that work is under way, without polling.
    ///
    /// For example:
    ///
    /// ```swift
    /// controller.enqueue(PublishPost(text: "hi"))
    /// try await transport.waitingAtGate(atLeast: 1)
    /// ```
    ///
    /// - Parameters:
    ///   - count: How many requests must wait at the gate.
    ///   - timeout: How long to wait, in real time, before failing (30 s).
    /// - Throws: ``Recorder/Failure`` when the time runs out first.
    @discardableResult
    public func waitingAtGate(atLeast count: Int, timeout: Duration = .seconds(30)) async throws(Recorder<Void>.Failure) -> [TransportRequest] {
        try await wait(for: "\(count) requests waiting at the gate", timeout: timeout) { state in
            state.atGate.count >= count ? state.waitingAtGate : nil
        }
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let (exchange, answer) = state.withLock { state -> (Int, Answer) in
            state.exchanges.append(Exchange(request: request, sentAt: state.count))
            state.count += 1
            let exchange = state.exchanges.count - 1
            if state.isOffline { return (exchange, .failure(DepotError(.offline, detail: "ScriptedTransport is offline"))) }
            if state.byPath[request.url.path] != nil { return (exchange, state.byPath[request.url.path]!.take()) }
            return (exchange, state.otherPaths.take())
        }
        changed()
        do {
            if answer.isGated { try await passGate(exchange) }
            let response = try await answer.response(to: request)
            answered(exchange) { $0.status = response.status }
            return response
        } catch {
            answered(exchange) { $0.failure = error }
            throw error
        }
    }

    /// Shuts down the transport given to ``init(forwardingTo:)``, if any;
    /// ``/Depot/NetworkController/shutdown(grace:)`` calls it.
    ///
    /// For example: `await transport.shutdown()`.
    public func shutdown() async {
        await forwarded?.shutdown()
    }

    // MARK: - Private

    private func passGate(_ exchange: Int) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let goes = state.withLock { state -> Bool? in
                    if Task.isCancelled { return false }
                    if state.gateIsOpen { return true }
                    if state.passes > 0 {
                        state.passes -= 1
                        return true
                    }
                    state.atGate.append((exchange, continuation))
                    return nil
                }
                switch goes {
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: DepotError(.cancelled))
                case nil: changed()
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.atGate.firstIndex(where: { $0.exchange == exchange }) else { return nil }
                return state.atGate.remove(at: index).continuation
            }
            waiter?.resume(throwing: DepotError(.cancelled, detail: "cancelled while waiting at the ScriptedTransport's gate"))
        }
    }

    private func answered(_ exchange: Int, _ record: (inout Exchange) -> Void) {
        state.withLock { state in
            record(&state.exchanges[exchange])
            state.exchanges[exchange].answeredAt = state.count
            state.count += 1
        }
        changed()
    }

    /// Tells every fact's waiter that something changed.
    private func changed() {
        let watchers = state.withLock { Array($0.watchers.values) }
        for watcher in watchers { watcher.yield() }
    }

    /// Returns what `found` finds, checked now and after each change, or
    /// fails after `timeout` saying what was awaited and what came.
    private func wait<Found: Sendable>(for what: String, timeout: Duration, _ found: (State) -> Found?) async throws(Recorder<Void>.Failure) -> Found {
        let (changes, change) = AsyncStream.makeStream(of: Void.self)
        let (id, now) = state.withLock { state -> (UInt64, Found?) in
            state.nextWatcher += 1
            if let now = found(state) { return (state.nextWatcher, now) }
            state.watchers[state.nextWatcher] = change
            return (state.nextWatcher, nil)
        }
        defer {
            state.withLock { _ = $0.watchers.removeValue(forKey: id) }
            change.finish()
        }
        if let now { return now }
        let recorder = Recorder(changes, timeout: timeout)
        while true {
            do {
                try await recorder.next()
            } catch {
                let got = exchanges.map(\.description).joined(separator: ", ")
                throw Recorder<Void>.Failure(description: "no \(what) after \(timeout); the transport got: \(got.isEmpty ? "nothing" : got)")
            }
            if let now = state.withLock({ found($0) }) { return now }
        }
    }
}
