import Foundation
import Synchronization

/// Records the values of an asynchronous sequence so that a test can wait for
/// the one it expects, instead of polling: GRDB's `ValueObservationRecorder`,
/// for Depot's sequences (``/Depot/NetworkController/events()``,
/// `ResultsController.updates()`, `SyncStatus.updates()`, `Outbox.updates()`).
///
/// Recording starts when the recorder is made. ``next(where:)`` moves a cursor
/// through the recorded values, so each call sees only what came after the
/// last value it returned; values that arrive coalesced are fine as long as
/// the one the test waits for arrives.
///
/// For example:
///
/// ```swift
/// let events = Recorder(controller.events())
/// let ticket = controller.enqueue(FetchTopSongs())
/// let failure = try await events.next { $0.kind == .failed }
/// ```
///
/// A wait that finds nothing fails with ``Recorder/Failure``, which lists
/// what was recorded, after `timeout` of real time (a guard against a test
/// that hangs, not a way to measure time), or at once when the sequence ends.
public final class Recorder<Element: Sendable>: Sendable {
    /// Why a wait found nothing: the sequence ended, or the time ran out.
    public struct Failure: Error, CustomStringConvertible {
        /// One sentence, with the values recorded after the cursor.
        public let description: String
    }

    private struct State {
        var values: [Element] = []
        var finished = false
        var failure: (any Error)?
        /// Index of the next value ``next(where:)`` looks at.
        var cursor = 0
        var waiters: [UInt64: Waiter] = [:]
        var nextWaiter: UInt64 = 0
    }

    private struct Waiter {
        var from: Int
        var predicate: @Sendable (Element) -> Bool
        var continuation: CheckedContinuation<Result<(Element, Int), Failure>, Never>
    }

    private let state = Mutex(State())
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)
    private let timeout: Duration

    /// Starts recording `sequence`.
    ///
    /// - Parameters:
    ///   - sequence: What to record; iterated from now on, in a task of its own.
    ///   - timeout: How long a wait may take, in real time, before it fails
    ///     (30 s: a whole suite run in parallel on two busy cores can keep the
    ///     main actor, which delivers most of what is recorded, seconds behind).
    public init<Values: AsyncSequence & Sendable>(_ sequence: Values, timeout: Duration = .seconds(30)) where Values.Element == Element {
        self.timeout = timeout
        let recording = Task { [weak self] in
            do {
                for try await value in sequence {
                    guard let self else { return }
                    self.record(value)
                }
                self?.finish(nil)
            } catch {
                self?.finish(error)
            }
        }
        task.withLock { $0 = recording }
    }

    deinit {
        task.withLock { $0?.cancel() }
    }

    /// Every value recorded so far.
    public var values: [Element] { state.withLock { $0.values } }

    /// Whether the sequence has ended.
    public var isFinished: Bool { state.withLock { $0.finished } }

    /// Waits for the next recorded value that satisfies `predicate`, after the
    /// last one this method returned, and moves the cursor past it.
    public func next(where predicate: @escaping @Sendable (Element) -> Bool = { _ in true }) async throws(Failure) -> Element {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let timeout = timeout
        // Real time, on purpose: this guards a test that would hang; it
        // measures nothing, and no behaviour under test waits on it.
        let timer = Task { [weak self] in
            try? await ContinuousClock().sleep(for: timeout)
            guard !Task.isCancelled else { return }
            self?.expire(id, after: timeout)
        }
        defer { timer.cancel() }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<(Element, Int), Failure>, Never>) in
            let now = state.withLock { state -> Result<(Element, Int), Failure>? in
                if let found = Self.find(predicate, in: state.values, from: state.cursor) { return .success(found) }
                if state.finished { return .failure(Self.ended(state)) }
                state.waiters[id] = Waiter(from: state.cursor, predicate: predicate, continuation: continuation)
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
        switch result {
        case .success(let (value, index)):
            state.withLock { $0.cursor = max($0.cursor, index + 1) }
            return value
        case .failure(let failure):
            throw failure
        }
    }

    /// Stops recording.
    public func cancel() {
        task.withLock { $0?.cancel() }
    }

    // MARK: - Private

    private static func find(_ predicate: (Element) -> Bool, in values: [Element], from start: Int) -> (Element, Int)? {
        guard start < values.count else { return nil }
        for index in start..<values.count where predicate(values[index]) { return (values[index], index) }
        return nil
    }

    private func record(_ value: Element) {
        let ready = state.withLock { state -> [(CheckedContinuation<Result<(Element, Int), Failure>, Never>, (Element, Int))] in
            state.values.append(value)
            let index = state.values.count - 1
            var ready: [(CheckedContinuation<Result<(Element, Int), Failure>, Never>, (Element, Int))] = []
            for (id, waiter) in state.waiters where index >= waiter.from && waiter.predicate(value) {
                state.waiters[id] = nil
                ready.append((waiter.continuation, (value, index)))
            }
            return ready
        }
        for (continuation, found) in ready { continuation.resume(returning: .success(found)) }
    }

    private func finish(_ error: (any Error)?) {
        let (waiters, failure) = state.withLock { state in
            state.finished = true
            state.failure = error
            defer { state.waiters = [:] }
            return (state.waiters.values.map(\.continuation), Self.ended(state))
        }
        for waiter in waiters { waiter.resume(returning: .failure(failure)) }
    }

    private func expire(_ id: UInt64, after timeout: Duration) {
        let (waiter, failure) = state.withLock { state in
            (state.waiters.removeValue(forKey: id), Failure(description: "no matching value after \(timeout); recorded after the cursor: \(Self.listed(state))"))
        }
        waiter?.continuation.resume(returning: .failure(failure))
    }

    private static func ended(_ state: State) -> Failure {
        let how = state.failure.map { "failed with \($0)" } ?? "ended"
        return Failure(description: "the sequence \(how) with no matching value; recorded after the cursor: \(listed(state))")
    }

    private static func listed(_ state: State) -> String {
        let rest = state.values.count > state.cursor ? Array(state.values[state.cursor...]) : []
        let shown = rest.suffix(20).map { "\($0)" }
        return rest.isEmpty ? "nothing" : (rest.count > 20 ? "…, " : "") + shown.joined(separator: ", ")
    }
}
