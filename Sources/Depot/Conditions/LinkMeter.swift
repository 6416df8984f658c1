import Foundation
import Synchronization

/// Measures the LINK, not one transfer: with four transfers sharing a
/// 2 Mbit/s link each one sees 500 kbit/s, but the link is still a 2 Mbit/s
/// link. The controller counts every body byte and the time during which at
/// least one body was arriving ("busy" time: round trips with no body in flight
/// do not count). When a measurable transfer ends, the bytes and busy time since
/// the previous sample become one sample, if there is enough of both.
final class LinkMeter: Sendable {
    /// The shortest busy time a link sample may cover: bodies arrive in chunks,
    /// so a short window counts whole chunks whose bytes crossed the link
    /// before it. On a link slower than 20 Mbit/s the sample's bytes take
    /// longer than this anyway; on a fast one, whose busy spells are short,
    /// 100 ms kept the first estimate away for 160 ms, and delayable downloads
    /// came in small blind ranges meanwhile.
    static let minimumWindow = Duration.milliseconds(25)
    /// The fewest chunks a link sample may hold: its first chunk's bytes
    /// crossed the link before the window, so with eight a sample overstates
    /// the link by at most an eighth, however large the transport's reads
    /// (64 KB on a fast link read 1.77 times a 10 Mbit/s link over 25 ms).
    static let minimumChunks: Int64 = 8

    /// The controller's running totals.
    final class Counter: Sendable {
        private struct State {
            var bytes: Int64 = 0
            var chunks: Int64 = 0
            var active = 0
            var busy: Duration = .zero
            var busySince: Duration = .zero
            var lastSample: (busy: Duration, bytes: Int64, chunks: Int64) = (.zero, 0, 0)
        }

        private let state = Mutex(State())

        /// A transfer's body begins to arrive at `time` (its head is in): the
        /// link is busy from then until its end.
        ///
        /// The window opens at the head, not at the first chunk: a first chunk's
        /// bytes crossed the link before it arrived. Opening at the first chunk
        /// counted those bytes with none of their time, and overstated the
        /// link most where transfers are small or start together (two 3 KB
        /// bodies that start at once read 1.47 times the link).
        func begin(at time: Duration) {
            state.withLock { state in
                if state.active == 0 { state.busySince = time }
                state.active += 1
            }
        }

        /// A chunk of body bytes arrived.
        func add(_ bytes: Int64) {
            state.withLock { state in
                state.bytes += bytes
                state.chunks += 1
            }
        }

        /// A transfer that had begun ended; with `minimumBytes`, also takes a sample.
        func end(at time: Duration, takingSampleOf minimumBytes: Int64? = nil) -> (bytes: Int64, busy: Duration)? {
            state.withLock { state in
                state.active -= 1
                if state.active == 0 { state.busy += time - state.busySince }
                guard let minimumBytes else { return nil }
                return Self.takeSample(at: time, minimumBytes: minimumBytes, in: &state)
            }
        }

        /// Bytes and busy time since the previous sample, if they make a measurement.
        func takeSample(at time: Duration, minimumBytes: Int64) -> (bytes: Int64, busy: Duration)? {
            state.withLock { Self.takeSample(at: time, minimumBytes: minimumBytes, in: &$0) }
        }

        private static func takeSample(at time: Duration, minimumBytes: Int64, in state: inout State) -> (bytes: Int64, busy: Duration)? {
            let busy = state.busy + (state.active > 0 ? time - state.busySince : .zero)
            let delta = (bytes: state.bytes - state.lastSample.bytes, busy: busy - state.lastSample.busy)
            guard delta.busy >= LinkMeter.minimumWindow, delta.bytes >= minimumBytes,
                  state.chunks - state.lastSample.chunks >= LinkMeter.minimumChunks else { return nil }
            state.lastSample = (busy, state.bytes, state.chunks)
            return delta
        }
    }

    private struct State {
        var received: Int64 = 0
        var began = false
        var ended = false
        /// Between two byte ranges: no body is on its way for this transfer.
        var paused = false
    }

    private let link: Counter
    private let now: @Sendable () -> Duration
    private let state = Mutex(State())

    init(controller link: Counter, now: @escaping @Sendable () -> Duration) {
        self.link = link
        self.now = now
    }

    /// The head arrived at `time`: the body may keep the link busy from now on.
    @Sendable func begin(at time: Duration) {
        let first = state.withLock { state -> Bool in
            defer { state.began = true }
            return !state.began && !state.ended
        }
        if first { link.begin(at: time) }
    }

    /// A byte range ended and the next is not asked for yet (see
    /// ``DelayablePacing``): the round trip until its head, and any wait for
    /// urgent work, do not keep the link busy. Counting them read a lone ranged
    /// download's link at about 75% of its speed, and shrank its ranges with it.
    @Sendable func pause() {
        let pauses = state.withLock { state -> Bool in
            guard state.began, !state.ended, !state.paused else { return false }
            state.paused = true
            return true
        }
        if pauses { _ = link.end(at: now()) }
    }

    /// The next byte range's head arrived: the link is busy again.
    @Sendable func resume() {
        let resumes = state.withLock { state -> Bool in
            guard state.paused, !state.ended else { return false }
            state.paused = false
            return true
        }
        if resumes { link.begin(at: now()) }
    }

    /// A chunk arrived; `received` is this transfer's running total.
    func record(_ received: Int64) {
        let delta = state.withLock { state -> Int64 in
            let delta = received - state.received
            state.received = received
            return delta
        }
        link.add(delta)
    }

    /// Marks the transfer ended; whether it was busy on the link (and so must end there).
    private func markEnded() -> Bool {
        state.withLock { state -> Bool in
            defer { state.ended = true }
            return state.began && !state.ended && !state.paused
        }
    }

    /// The transfer is over (whatever the outcome): its body no longer keeps the link busy.
    func finish() {
        if markEnded() { _ = link.end(at: now()) }
    }

    /// The sample to give the monitor. Whichever transfer ends, big or small, it
    /// closes a link sample when the link carried enough since the previous one
    /// (four times `minimumBytes`, over at least ``minimumWindow``); otherwise
    /// the sample carries no bytes and counts toward RTT only. Small transfers
    /// alone thus still measure the link: a controller that only fetches 3 KB
    /// feeds learns that the link got faster.
    func linkSample(for sample: TransferSample?, minimumBytes: Int64) -> TransferSample? {
        guard var sample else { return nil }
        let began = markEnded()
        let time = now()
        let window: (bytes: Int64, busy: Duration)?
        if began {
            window = link.end(at: time, takingSampleOf: 4 * minimumBytes)
        } else {
            window = link.takeSample(at: time, minimumBytes: 4 * minimumBytes)
        }
        if let window {
            sample.bytes = window.bytes
            sample.transferDuration = window.busy
        } else {
            sample.bytes = 0
        }
        return sample
    }
}
