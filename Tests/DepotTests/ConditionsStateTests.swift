@testable import Depot
import Testing

/// `ConditionsState` alone, as the controller drives it: each event and the
/// effects it answers, in order.
@Suite struct ConditionsStateTests {
    typealias Queued = QualityRules.Queued<Ticket.ID>

    static func id(_ raw: UInt64) -> Ticket.ID { Ticket.ID(rawValue: raw) }

    @Test func itStartsWithThePolicysLimitOnline() {
        let conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .default)
        #expect(conditions.effectiveLimit == 4)
        #expect(conditions.appliedLimit == 4)
        #expect(ConditionsState(quality: .offline, policyLimit: 4, rules: .default).appliedLimit == 0)
    }

    @Test func goingOfflineStartsProbingAndAProbeOpensAWindowOfOne() {
        var conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .none)
        // When the network goes, the limit is not applied at once: the policy's limit follows the change
        #expect(conditions.handle(.qualityChanged(from: .good, to: .offline, queued: [])) == [
            .announce(.qualityChanged(from: .good, to: .offline)), .traceQuality(.offline), .startProbing,
        ])
        #expect(conditions.handle(.policyLimitChanged(0)) == [.announce(.concurrencyChanged(limit: 0)), .setLimit(0)])

        // Then each probe lets one job try
        #expect(conditions.handle(.probeDue) == [.announce(.probing(attempt: 1)), .announce(.concurrencyChanged(limit: 1)), .setLimit(1)])
        #expect(conditions.handle(.probeFoundNoNetwork) == [.announce(.concurrencyChanged(limit: 0)), .setLimit(0)])
        #expect(conditions.handle(.probeDue) == [.announce(.probing(attempt: 2)), .announce(.concurrencyChanged(limit: 1)), .setLimit(1)])

        // And when it comes back, probing stops and the count starts over
        #expect(conditions.handle(.qualityChanged(from: .offline, to: .moderate, queued: [])) == [
            .announce(.qualityChanged(from: .offline, to: .moderate)), .traceQuality(.moderate), .stopProbing,
        ])
        #expect(conditions.handle(.policyLimitChanged(2)) == [.announce(.concurrencyChanged(limit: 2)), .setLimit(2)])
        #expect(conditions.probeAttempt == 0)
    }

    @Test func aProbeDueOnlineDoesNothing() {
        var conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .none)
        #expect(conditions.handle(.probeDue) == [])
        #expect(conditions.handle(.probeFoundNoNetwork) == [])
        #expect(!conditions.probing)
    }

    @Test func anUnchangedLimitIsNotAnnounced() {
        var conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .none)
        #expect(conditions.handle(.policyLimitChanged(4)) == [])
        #expect(conditions.handle(.policyLimitChanged(6)) == [.announce(.concurrencyChanged(limit: 6)), .setLimit(6)])
    }

    @Test func aFailFastProbeRunsAloneOffline() {
        var conditions = ConditionsState(quality: .offline, policyLimit: 4, rules: .none)
        #expect(conditions.handle(.failFastProbeAdmitted) == [.announce(.concurrencyChanged(limit: 1)), .setLimit(1)])
        #expect(conditions.handle(.probeFoundNoNetwork) == [.announce(.concurrencyChanged(limit: 0)), .setLimit(0)])
    }

    @Test func aPoorNetworkPausesImagesAndDropsDroppableLowWork() {
        var conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .default)
        let low = Queued(id: Self.id(1), priority: .low, category: .images)
        let kept = Queued(id: Self.id(2), priority: .low, category: .default)
        let high = Queued(id: Self.id(3), priority: .high, category: .default)
        _ = conditions.handle(.droppableQueued(low.id))
        _ = conditions.handle(.droppableQueued(high.id))

        let effects = conditions.handle(.qualityChanged(from: .good, to: .poor, queued: [low, kept, high]))

        #expect(effects == [
            .announce(.qualityChanged(from: .good, to: .poor)), .traceQuality(.poor),
            .pause(.images), .announce(.categoryPaused(.images)),
            .drop(low.id),
        ])
        #expect(conditions.trickling == [.images])
        #expect(conditions.drops(.low))
        #expect(!conditions.drops(.normal))
    }

    @Test func recoveryResumesOnlyWhatTheAppDidNotPause() {
        var conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .default)
        _ = conditions.handle(.qualityChanged(from: .good, to: .poor, queued: []))
        // When the app pauses images too, a rule no longer holds them alone
        #expect(conditions.handle(.userPaused(.images)) == [.pause(.images)])
        #expect(conditions.trickling.isEmpty)

        // Then recovery announces the rule's end but leaves images paused
        #expect(conditions.handle(.qualityChanged(from: .poor, to: .good, queued: [])) == [
            .announce(.qualityChanged(from: .poor, to: .good)), .traceQuality(.good),
            .announce(.categoryResumed(.images)),
        ])
        #expect(conditions.handle(.userResumed(.images)) == [.resume(.images)])
    }

    @Test func theAppCannotResumeWhatARuleHolds() {
        var conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .default)
        _ = conditions.handle(.qualityChanged(from: .good, to: .poor, queued: []))
        #expect(conditions.handle(.userPaused(.images)) == [.pause(.images)])
        #expect(conditions.handle(.userResumed(.images)) == [])
        #expect(conditions.trickling == [.images])
    }

    @Test func aTicketThatLeftTheQueueIsNotDropped() {
        var conditions = ConditionsState(quality: .good, policyLimit: 4, rules: .default)
        let low = Queued(id: Self.id(1), priority: .low, category: .default)
        _ = conditions.handle(.droppableQueued(low.id))
        _ = conditions.handle(.ticketLeftQueue(low.id))
        let effects = conditions.handle(.qualityChanged(from: .good, to: .poor, queued: [low]))
        #expect(!effects.contains(.drop(low.id)))
    }
}
