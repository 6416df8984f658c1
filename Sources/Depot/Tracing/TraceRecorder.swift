import Foundation
import Synchronization

/// Collects a ``Trace`` while the controller works; safe to call from any thread.
///
/// The controller reports each operation's life as it happens; times are
/// offsets on the controller's time line. The oldest finished entries are
/// dropped past ``capacity``, so a long-running app does not grow without bound.
///
/// For example:
///
/// ```swift
/// let recorder = TraceRecorder()
/// let controller = NetworkController(configuration: .init(baseURL: api, observability: .init(trace: recorder)))
/// _ = try await controller.perform(FetchTimeline())
/// let svg = recorder.trace().svg()   // the waterfall of what ran
/// ```
public final class TraceRecorder: Sendable {
    private struct State {
        var entries: [UInt64: Trace.Entry] = [:]
        var order: [UInt64] = []
        var qualityChanges: [Trace.QualityChange] = []
        var latest: Duration = .zero
    }

    private let state = Mutex(State())

    /// How many entries are kept; past it, the oldest finished ones go first.
    public let capacity: Int

    /// Makes an empty recorder.
    ///
    /// - Parameter capacity: How many entries to keep (10,000).
    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    /// An operation was enqueued. A second call with the same id is ignored.
    public func enqueued(_ id: Ticket.ID, name: String, priority: Priority, category: OperationCategory, at time: Duration) {
        state.withLock { state in
            guard state.entries[id.rawValue] == nil else { return }
            state.entries[id.rawValue] = Trace.Entry(id: id.rawValue, name: name, priority: priority, category: category, enqueued: time)
            state.order.append(id.rawValue)
            state.latest = max(state.latest, time)
            trim(&state)
        }
    }

    /// An attempt of the operation started (each retry calls this again).
    public func started(_ id: Ticket.ID, at time: Duration) {
        update(id, at: time) { entry in
            if entry.started == nil { entry.started = time }
            entry.attempts += 1
            entry.firstByte = nil
        }
    }

    /// The response head of the current attempt arrived.
    public func firstByte(_ id: Ticket.ID, at time: Duration) {
        update(id, at: time) { $0.firstByte = time }
    }

    /// The operation ended.
    public func finished(_ id: Ticket.ID, at time: Duration, bytes: Int64, outcome: Trace.Outcome) {
        update(id, at: time) { entry in
            entry.finished = time
            entry.bytes = bytes
            entry.outcome = outcome
        }
    }

    /// The connection quality changed.
    public func quality(_ quality: ConnectionQuality, at time: Duration) {
        state.withLock { state in
            state.qualityChanges.append(Trace.QualityChange(at: time, quality: quality))
            state.latest = max(state.latest, time)
        }
    }

    /// A snapshot of everything recorded, ending at `end` (or at the latest recorded time).
    ///
    /// - Parameter end: The end of the time line; `nil` takes the latest recorded time.
    public func trace(end: Duration? = nil) -> Trace {
        state.withLock { state in
            Trace(
                entries: state.order.compactMap { state.entries[$0] },
                qualityChanges: state.qualityChanges,
                end: end.map { max($0, state.latest) } ?? state.latest
            )
        }
    }

    /// The snapshot as JSON; see ``Trace/jsonData()``.
    public func jsonData() throws -> Data { try trace().jsonData() }

    /// The snapshot as an SVG waterfall; see ``Trace/svg(_:)``.
    public func svg(_ options: Trace.SVGOptions = .default) -> String { trace().svg(options) }

    private func update(_ id: Ticket.ID, at time: Duration, _ change: (inout Trace.Entry) -> Void) {
        state.withLock { state in
            guard var entry = state.entries[id.rawValue] else { return }
            change(&entry)
            state.entries[id.rawValue] = entry
            state.latest = max(state.latest, time)
        }
    }

    private func trim(_ state: inout State) {
        guard state.order.count > capacity else { return }
        var excess = state.order.count - capacity
        state.order.removeAll { id in
            guard excess > 0, state.entries[id]?.finished != nil else { return false }
            excess -= 1
            state.entries[id] = nil
            return true
        }
    }
}
