import Depot
import Testing

@Suite struct ConnectionMonitorTests {
    /// A sample of `bytes` whose body took long enough to give `bitsPerSecond`.
    func sample(bitsPerSecond: Double, bytes: Int64 = 64_000, ttfb: Duration = .milliseconds(100)) -> TransferSample {
        TransferSample(bytes: bytes, timeToFirstByte: ttfb, transferDuration: .seconds(Double(bytes) * 8 / bitsPerSecond))
    }

    func changes(_ actions: [ConnectionMonitor.Action]) -> [ConnectionQuality] {
        actions.map { action in
            switch action {
            case .qualityChanged(_, let to): return to
            }
        }
    }

    @Test func thresholdsFollowNetworkConnectionClass() {
        let thresholds = ConnectionQuality.Thresholds.default
        #expect(thresholds.quality(forBandwidth: 149_999) == .poor)
        #expect(thresholds.quality(forBandwidth: 150_000) == .moderate)
        #expect(thresholds.quality(forBandwidth: 549_999) == .moderate)
        #expect(thresholds.quality(forBandwidth: 550_000) == .good)
        #expect(thresholds.quality(forBandwidth: 2_000_000) == .excellent)
        #expect(ConnectionQuality.offline < .poor && ConnectionQuality.good < .excellent)
        let custom = ConnectionQuality.Thresholds(moderate: 1_000, good: 2_000, excellent: 3_000)
        #expect(custom.quality(forBandwidth: 2_500) == .good)
    }

    @Test func startsAtTheInitialQualityWithNoEstimates() {
        let monitor = ConnectionMonitor(configuration: .init(initialQuality: .moderate))
        #expect(monitor.quality == .moderate)
        #expect(monitor.bandwidth == nil)
        #expect(monitor.rtt == nil)
    }

    @Test func changesClassOnlyAfterThreeSamplesInARow() {
        var monitor = ConnectionMonitor()   // starts .good
        // Two excellent samples are not enough...
        #expect(monitor.handle(.transfer(sample(bitsPerSecond: 10_000_000)), at: .seconds(1)).isEmpty)
        #expect(monitor.handle(.transfer(sample(bitsPerSecond: 10_000_000)), at: .seconds(2)).isEmpty)
        // ...the third is.
        #expect(monitor.handle(.transfer(sample(bitsPerSecond: 10_000_000)), at: .seconds(3)) == [.qualityChanged(from: .good, to: .excellent)])
        #expect(monitor.quality == .excellent)
    }

    @Test func aSampleBackInTheCurrentClassResetsTheCount() {
        var monitor = ConnectionMonitor(configuration: .init(bandwidthWeight: 1))   // no smoothing: each sample decides
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 100_000)), at: .seconds(1))
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 100_000)), at: .seconds(2))
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 1_000_000)), at: .seconds(3))   // good again
        #expect(monitor.handle(.transfer(sample(bitsPerSecond: 100_000)), at: .seconds(4)).isEmpty)
        #expect(monitor.handle(.transfer(sample(bitsPerSecond: 100_000)), at: .seconds(5)).isEmpty)
        #expect(changes(monitor.handle(.transfer(sample(bitsPerSecond: 100_000)), at: .seconds(6))) == [.poor])
    }

    @Test func smallTransfersFeedOnlyTheRoundTrip() {
        var monitor = ConnectionMonitor()
        for second in 1...5 {
            _ = monitor.handle(.transfer(sample(bitsPerSecond: 10_000, bytes: 2_000, ttfb: .milliseconds(200))), at: .seconds(second))
        }
        #expect(monitor.quality == .good)
        #expect(monitor.bandwidth == nil)
        #expect(monitor.bandwidthSampleCount == 0)
        #expect(monitor.rtt == .milliseconds(200))
    }

    /// The default minimum measures an 8 KB image on its own.
    @Test func anImageOf8KBFeedsTheBandwidth() throws {
        var monitor = ConnectionMonitor()
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 120_000, bytes: 8 * 1024)), at: .seconds(1))
        #expect(monitor.bandwidthSampleCount == 1)
        #expect(abs(try #require(monitor.bandwidth) - 120_000) < 1)
    }

    @Test func bandwidthIsAMovingAverage() throws {
        var monitor = ConnectionMonitor(configuration: .init(bandwidthWeight: 0.5))
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 1_000_000)), at: .seconds(1))
        #expect(abs(try #require(monitor.bandwidth) - 1_000_000) < 1)
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 4_000_000)), at: .seconds(2))
        // Halfway in log space: the geometric mean.
        #expect(abs(try #require(monitor.bandwidth) - 2_000_000) < 1)
    }

    @Test func roundTripIsSmoothedAndItsMinimumKept() throws {
        var monitor = ConnectionMonitor()
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 1_000_000, ttfb: .milliseconds(100))), at: .seconds(1))
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 1_000_000, ttfb: .milliseconds(900))), at: .seconds(2))
        // 100 + (900 - 100) / 8
        #expect(monitor.rtt == .milliseconds(200))
        #expect(monitor.minimumRTT == .milliseconds(100))
        // After the window, a newer sample replaces a stale minimum.
        _ = monitor.handle(.transfer(sample(bitsPerSecond: 1_000_000, ttfb: .milliseconds(300))), at: .seconds(40))
        #expect(monitor.minimumRTT == .milliseconds(300))
    }

    @Test func aFallFrom20MbpsTo100kbpsShowsWithinAFewSamples() {
        var monitor = ConnectionMonitor()
        for second in 1...5 { _ = monitor.handle(.transfer(sample(bitsPerSecond: 20_000_000)), at: .seconds(second)) }
        #expect(monitor.quality == .excellent)
        var seen: [ConnectionQuality] = []
        var count = 0
        while monitor.quality != .poor, count < 20 {
            count += 1
            seen += changes(monitor.handle(.transfer(sample(bitsPerSecond: 100_000)), at: .seconds(10 + count)))
        }
        #expect(monitor.quality == .poor)
        #expect(count <= 8)
        #expect(seen.last == .poor)
    }

    @Test func connectionFailureGoesOfflineAtOnceAndAnAnswerComesBack() {
        // Given a monitor that has settled on excellent
        var monitor = ConnectionMonitor()
        for second in 1...3 { _ = monitor.handle(.transfer(sample(bitsPerSecond: 10_000_000)), at: .seconds(second)) }
        // When a connection fails
        #expect(monitor.handle(.connectionFailed, at: .seconds(4)) == [.qualityChanged(from: .excellent, to: .offline)])
        #expect(monitor.handle(.connectionFailed, at: .seconds(5)).isEmpty)
        #expect(monitor.quality == .offline)
        // Then any answer brings back the class known before
        #expect(monitor.handle(.responded, at: .seconds(6)) == [.qualityChanged(from: .offline, to: .excellent)])
        #expect(monitor.handle(.responded, at: .seconds(7)).isEmpty)
    }

    @Test func offlineBeforeAnyMeasurementReturnsToTheInitialQuality() {
        var monitor = ConnectionMonitor(configuration: .init(initialQuality: .moderate))
        _ = monitor.handle(.connectionFailed, at: .seconds(1))
        let actions = monitor.handle(.transfer(sample(bitsPerSecond: 10_000_000)), at: .seconds(2))
        #expect(actions == [.qualityChanged(from: .offline, to: .moderate)])
    }

    @Test func failuresMapToEvents() {
        #expect(ConnectionMonitor.Event.failure(DepotError(.offline)) == .connectionFailed)
        #expect(ConnectionMonitor.Event.failure(DepotError.forStatus(503)) == .responded)
        #expect(ConnectionMonitor.Event.failure(DepotError(.timedOut)) == nil)
    }
}
