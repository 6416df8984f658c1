import Depot
import Testing

@Suite struct QualityRulesTests {
    typealias Queued = QualityRules.Queued<Int>

    let queued: [Queued] = [
        .init(id: 1, priority: .veryLow, category: .default),
        .init(id: 2, priority: .low, category: .images),
        .init(id: 3, priority: .normal, category: .default),
        .init(id: 4, priority: .low, category: .timeline),
    ]

    @Test func goingPoorPausesImagesAndDropsLowDroppableWork() {
        // Given everything but #4 may be dropped
        let rules = QualityRules.default
        // When the network turns poor
        let changes = rules.changes(from: .good, to: .poor, queued: queued) { $0 != 4 }
        // Then images pause and the low, droppable work goes
        #expect(changes.pause == [.images])
        #expect(changes.resume.isEmpty)
        #expect(changes.cancel == [1, 2])
    }

    @Test func recoveringResumesButDropsNothing() {
        let changes = QualityRules.default.changes(from: .poor, to: .moderate, queued: queued) { _ in true }
        #expect(changes.resume == [.images])
        #expect(changes.pause.isEmpty && changes.cancel.isEmpty)
    }

    @Test func movingWithinOrOutsideTheRulesChangesNothing() {
        let rules = QualityRules.default
        #expect(rules.changes(from: .poor, to: .offline, queued: queued) { _ in true }.isEmpty)
        #expect(rules.changes(from: .excellent, to: .moderate, queued: queued) { _ in true }.isEmpty)
    }

    @Test func offlineIsWorseThanPoor() {
        let changes = QualityRules.default.changes(from: .good, to: .offline, queued: queued) { _ in true }
        #expect(changes.pause == [.images])
        #expect(changes.cancel == [1, 2, 4])
    }

    @Test func thresholdAndPriorityAreConfigurable() {
        let rules = QualityRules(threshold: .moderate, pausedCategories: [.images, .timeline], dropPriorityAtMost: .normal)
        let changes = rules.changes(from: .good, to: .moderate, queued: queued) { _ in true }
        #expect(changes.pause == [.images, .timeline])
        #expect(changes.cancel == [1, 2, 3, 4])
        #expect(rules.drops(.normal, at: .poor))
        #expect(!rules.drops(.high, at: .poor))
        #expect(!rules.drops(.veryLow, at: .good))
    }

    @Test func noneNeverApplies() {
        #expect(QualityRules.none.changes(from: .excellent, to: .offline, queued: queued) { _ in true }.isEmpty)
        #expect(!QualityRules.none.drops(.veryLow, at: .offline))
    }
}
