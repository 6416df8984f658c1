import Foundation

/// Learns how good the network is from the transfers that go over it.
///
/// `ConnectionMonitor` is a pure state machine: it does no I/O and reads no
/// clock. The controller feeds it what happened and when (time as a `Duration`
/// since some fixed origin, the way the controller's clock measures it), and
/// carries out the actions it returns.
///
/// - Bandwidth is an exponentially weighted moving average, taken in log space
///   (a geometric mean, so a fall from 20 Mbps to 100 kbps shows as quickly as
///   the climb back), of the transfers of at least
///   ``Configuration/minimumMeasurableBytes``. Smaller samples say more about
///   latency than about bandwidth. A ``NetworkController`` measures the link,
///   not one body: its samples are windows of at least four times that many
///   bytes and eight reads, over at least 25 ms of the time at least one
///   body was arriving, whichever transfers carried them, so many small
///   responses measure the link too.
/// - Round-trip time is a moving average of every transfer's time to first byte
///   (which includes server time), as in TCP's smoothed RTT. The minimum round
///   trip of the last ``Configuration/minimumRTTWindow`` is kept too.
/// - Quality changes with hysteresis: ``Configuration/samplesToChange`` bandwidth
///   samples in a row must fall below (or rise above) the current class; it then
///   moves to the class nearest the current one among them. A connection
///   failure goes `.offline` at once; any answer from a server leaves `.offline`
///   at once, back to the class known before.
///
/// Each controller has its own monitor, made from its configuration's
/// ``Configuration``. For example, a monitor slower to change its mind:
///
/// ```swift
/// var configuration = NetworkController.Configuration(baseURL: api)
/// configuration.conditions.monitor.samplesToChange = 5
/// let controller = NetworkController(configuration: configuration)
/// if controller.quality <= .poor { showLowBandwidthHint() }
/// ```
public struct ConnectionMonitor: Sendable {
    /// How the monitor measures and how quickly it changes its mind.
    public struct Configuration: Sendable, Hashable {
        /// Where each quality begins, in bits per second.
        public var thresholds: ConnectionQuality.Thresholds
        /// Samples with fewer body bytes feed only the round-trip estimate (a
        /// controller's link windows hold at least four times this). 8 KB by
        /// default, so that images of 8–20 KB moved a few at a time measure the
        /// link (with 16 KB, Timeline's avatars showed a poor link after 16 s, not 9.3 s).
        public var minimumMeasurableBytes: Int64
        /// The weight of a new bandwidth sample in the (log-space) moving average, in `0 < w ≤ 1`.
        public private(set) var bandwidthWeight: Double
        /// The weight of a new round-trip sample in its moving average (TCP uses 1/8).
        public private(set) var rttWeight: Double
        /// How many bandwidth samples in a row must show a new class before the
        /// quality changes. Three by default: with two, a 2 Mbit/s link (a
        /// class boundary) went excellent and back in `depot-bench conditions`.
        public var samplesToChange: Int { didSet { samplesToChange = max(1, samplesToChange) } }
        /// The quality before anything is measured, and after `.offline` when nothing was known.
        public private(set) var initialQuality: ConnectionQuality
        /// How long a minimum round trip is trusted before a newer sample replaces it.
        public var minimumRTTWindow: Duration

        /// Makes a configuration; every parameter has a default.
        ///
        /// - Parameters:
        ///   - thresholds: Where each quality begins.
        ///   - minimumMeasurableBytes: The fewest bytes a sample needs to count for bandwidth (8 KB).
        ///   - bandwidthWeight: The weight of a new bandwidth sample (0.4).
        ///   - rttWeight: The weight of a new round-trip sample (0.125).
        ///   - samplesToChange: Samples in a row to change class (3).
        ///   - initialQuality: The quality before any measurement (`.good`).
        ///   - minimumRTTWindow: How long a minimum round trip is kept (30 s).
        public init(
            thresholds: ConnectionQuality.Thresholds = .default,
            minimumMeasurableBytes: Int64 = 8 * 1024,
            bandwidthWeight: Double = 0.4,
            rttWeight: Double = 0.125,
            samplesToChange: Int = 3,
            initialQuality: ConnectionQuality = .good,
            minimumRTTWindow: Duration = .seconds(30)
        ) {
            precondition(bandwidthWeight > 0 && bandwidthWeight <= 1, "bandwidthWeight must be in 0 < w ≤ 1")
            precondition(rttWeight > 0 && rttWeight <= 1, "rttWeight must be in 0 < w ≤ 1")
            precondition(initialQuality != .offline, "the initial quality cannot be offline")
            self.thresholds = thresholds
            self.minimumMeasurableBytes = minimumMeasurableBytes
            self.bandwidthWeight = bandwidthWeight
            self.rttWeight = rttWeight
            self.samplesToChange = max(1, samplesToChange)
            self.initialQuality = initialQuality
            self.minimumRTTWindow = minimumRTTWindow
        }

        /// Facebook's thresholds, 8 KB minimum, three samples to change, starting at `.good`.
        public static let `default` = Configuration()
    }

    /// Something that happened on the network.
    package enum Event: Sendable, Hashable {
        /// A transfer completed with these measurements. It is also an answer from a server.
        case transfer(TransferSample)
        /// A server answered (any status, even a failure after the head arrived).
        case responded
        /// No server could be reached: refused, DNS failure, no route (``DepotError/Code/offline``).
        case connectionFailed

        /// The event a failed transfer means for the monitor, if any.
        ///
        /// `.offline` errors are connection failures; errors that carry an HTTP
        /// status prove a server answered. Other failures (timeouts, lost
        /// connections, cancellation) say nothing certain and give `nil`.
        ///
        /// - Parameter error: The failure.
        package static func failure(_ error: DepotError) -> Event? {
            if error.code == .offline { return .connectionFailed }
            if error.status != nil { return .responded }
            return nil
        }
    }

    /// What the controller must do.
    package enum Action: Sendable, Hashable {
        /// The quality changed: adjust the concurrency limit and apply the quality rules.
        case qualityChanged(from: ConnectionQuality, to: ConnectionQuality)
    }

    let configuration: Configuration
    var current: ConnectionQuality
    /// The class before going offline.
    var lastOnline: ConnectionQuality
    /// The log of the bandwidth estimate (bits/s).
    var logBandwidth: Double?
    var smoothedRTT: Duration?
    var minRTT: (value: Duration, at: Duration)?
    /// The classes of the latest samples that all lay on one side of the current class.
    var streak: [ConnectionQuality] = []
    var bandwidthSamples = 0

    /// Makes a monitor at the configuration's initial quality, with no estimates.
    ///
    /// - Parameter configuration: How to measure and when to change class.
    package init(configuration: Configuration = .default) {
        self.configuration = configuration
        self.current = configuration.initialQuality
        self.lastOnline = configuration.initialQuality
    }

    /// The current quality.
    package var quality: ConnectionQuality { current }

    /// The estimated bandwidth in bits per second, once a large enough transfer was measured.
    package var bandwidth: Double? { logBandwidth.map { exp($0) } }

    /// The smoothed round-trip time (time to first byte), once a transfer was measured.
    package var rtt: Duration? { smoothedRTT }

    /// The smallest round trip seen within the configured window: the link's delay without queueing.
    package var minimumRTT: Duration? { minRTT?.value }

    /// How many transfers have fed the bandwidth estimate.
    package var bandwidthSampleCount: Int { bandwidthSamples }

    /// Takes in what happened at `time` and returns what to do about it.
    ///
    /// For example:
    ///
    /// ```swift
    /// let actions = monitor.handle(.connectionFailed, at: .seconds(12))
    /// // [.qualityChanged(from: .good, to: .offline)]
    /// ```
    ///
    /// - Parameters:
    ///   - event: What happened.
    ///   - time: When, as elapsed time since the controller's origin.
    package mutating func handle(_ event: Event, at time: Duration) -> [Action] {
        switch event {
        case .connectionFailed:
            guard current != .offline else { return [] }
            lastOnline = current
            streak = []
            return change(to: .offline)
        case .responded:
            return comeBackOnline()
        case .transfer(let sample):
            var actions = comeBackOnline()
            actions += measure(sample, at: time)
            return actions
        }
    }

    private mutating func comeBackOnline() -> [Action] {
        guard current == .offline else { return [] }
        return change(to: lastOnline)
    }

    private mutating func measure(_ sample: TransferSample, at time: Duration) -> [Action] {
        let rttSample = sample.timeToFirstByte
        if let smoothed = smoothedRTT {
            smoothedRTT = smoothed * (1 - configuration.rttWeight) + rttSample * configuration.rttWeight
        } else {
            smoothedRTT = rttSample
        }
        if let known = minRTT, known.value <= rttSample, time - known.at <= configuration.minimumRTTWindow {
            // Still the minimum, and still fresh.
        } else {
            minRTT = (rttSample, time)
        }

        guard sample.bytes >= configuration.minimumMeasurableBytes,
              let bytesPerSecond = sample.bytesPerSecond, bytesPerSecond > 0
        else { return [] }
        let logSample = log(bytesPerSecond * 8)
        let weight = configuration.bandwidthWeight
        logBandwidth = logBandwidth.map { $0 * (1 - weight) + logSample * weight } ?? logSample
        bandwidthSamples += 1

        // Hysteresis on the samples themselves, not on the smoothed value: the
        // smoothed value lags by design (it is what `bandwidth` reports), and
        // waiting for it to cross a threshold AND stay there took 8 samples to
        // notice a fall from 20 Mbit/s to 100 kbit/s. Here `samplesToChange`
        // samples in a row below (or above) the current class move it, to the
        // class nearest the current one among them: one odd sample moves nothing.
        let measured = configuration.thresholds.quality(forBandwidth: bytesPerSecond * 8)
        if measured == current {
            streak = []
            return []
        }
        if let first = streak.first, (first < current) != (measured < current) {
            streak = []
        }
        streak.append(measured)
        guard streak.count >= configuration.samplesToChange else { return [] }
        let target = measured < current ? streak.max()! : streak.min()!
        streak = []
        return change(to: target)
    }

    private mutating func change(to new: ConnectionQuality) -> [Action] {
        let old = current
        guard old != new else { return [] }
        current = new
        if new != .offline { lastOnline = new }
        return [.qualityChanged(from: old, to: new)]
    }
}
