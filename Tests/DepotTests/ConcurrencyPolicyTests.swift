import Depot
import Testing

@Suite struct ConcurrencyPolicyTests {
    @Test func defaultMapsEachQuality() {
        let policy = ConcurrencyPolicy.default
        #expect(ConnectionQuality.allCases.map(policy.limit(for:)) == [0, 1, 3, 4, 6])
    }

    @Test func fixedIsZeroOnlyOffline() {
        let policy = ConcurrencyPolicy.fixed(3)
        #expect(ConnectionQuality.allCases.map(policy.limit(for:)) == [0, 3, 3, 3, 3])
    }

    @Test func mappingFillsGapsFromBelow() {
        let policy = ConcurrencyPolicy.mapping([.poor: 1, .good: 3])
        #expect(ConnectionQuality.allCases.map(policy.limit(for:)) == [0, 1, 1, 3, 3])
        let custom = ConcurrencyPolicy.custom { $0.rawValue * 10 }
        #expect(custom.limit(for: .excellent) == 40)
    }

    @Test func updateReportsOnlyChanges() {
        var policy = ConcurrencyPolicy.default
        #expect(policy.limit == 4)
        #expect(policy.update(quality: .good, rtt: nil, minimumRTT: nil, at: .zero) == nil)
        #expect(policy.update(quality: .poor, rtt: nil, minimumRTT: nil, at: .seconds(1)) == 1)
        #expect(policy.update(quality: .poor, rtt: nil, minimumRTT: nil, at: .seconds(2)) == nil)
        #expect(policy.update(quality: .offline, rtt: nil, minimumRTT: nil, at: .seconds(3)) == 0)
    }

    @Test func adaptiveGrowsByOnePerRoundTripWhileTheRoundTripStaysLow() {
        var policy = ConcurrencyPolicy.adaptive(.init(initial: 2, maximum: 5))
        let rtt = Duration.milliseconds(200)
        var limits: [Int] = []
        // One update every 100 ms: only every second one is a full round trip after the last step.
        for step in 1...12 {
            if let limit = policy.update(quality: .good, rtt: rtt, minimumRTT: rtt, at: .milliseconds(100 * step)) { limits.append(limit) }
        }
        #expect(limits == [3, 4, 5])
        #expect(policy.limit == 5)
    }

    @Test func adaptiveHalvesWhenTheRoundTripInflates() {
        var policy = ConcurrencyPolicy.adaptive(.init(initial: 8, maximum: 8))
        #expect(policy.update(quality: .good, rtt: .milliseconds(500), minimumRTT: .milliseconds(100), at: .seconds(1)) == 4)
        // Not again within one round trip...
        #expect(policy.update(quality: .good, rtt: .milliseconds(500), minimumRTT: .milliseconds(100), at: .milliseconds(1_200)) == nil)
        // ...but after one.
        #expect(policy.update(quality: .good, rtt: .milliseconds(500), minimumRTT: .milliseconds(100), at: .milliseconds(1_600)) == 2)
        // Between the tolerances it holds.
        #expect(policy.update(quality: .good, rtt: .milliseconds(150), minimumRTT: .milliseconds(100), at: .seconds(3)) == nil)
        // Never below the minimum.
        for second in 4...8 {
            _ = policy.update(quality: .good, rtt: .milliseconds(500), minimumRTT: .milliseconds(100), at: .seconds(second))
        }
        #expect(policy.limit == 1)
    }

    @Test func adaptiveHalvesWhenQualityDropsAndRestoresAfterOffline() {
        var policy = ConcurrencyPolicy.adaptive(.init(initial: 6))
        _ = policy.update(quality: .excellent, rtt: nil, minimumRTT: nil, at: .seconds(1))
        #expect(policy.update(quality: .moderate, rtt: nil, minimumRTT: nil, at: .seconds(2)) == 3)
        #expect(policy.update(quality: .offline, rtt: nil, minimumRTT: nil, at: .seconds(3)) == 0)
        #expect(policy.update(quality: .moderate, rtt: nil, minimumRTT: nil, at: .seconds(4)) == 3)
    }

    @Test func adaptiveReadsTheMonitor() {
        var monitor = ConnectionMonitor()
        var policy = ConcurrencyPolicy.adaptive()
        let sample = TransferSample(bytes: 64_000, timeToFirstByte: .milliseconds(100), transferDuration: .milliseconds(500))
        var limits: [Int] = []
        for second in 1...4 {
            _ = monitor.handle(.transfer(sample), at: .seconds(second))
            if let limit = policy.update(from: monitor, at: .seconds(second)) { limits.append(limit) }
        }
        #expect(limits == [3, 4, 5, 6])
    }
}
