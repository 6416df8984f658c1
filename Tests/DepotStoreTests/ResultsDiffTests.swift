import DepotTesting
import Testing
@testable import DepotStore

@Suite struct ResultsDiffTests {
    struct Row: Identifiable, Equatable, Sendable, CustomStringConvertible {
        var id: String
        var value = 0
        var description: String { value == 0 ? id : "\(id)\(value)" }
    }

    /// Builds a snapshot from a compact description: `"a:x y|b:z"` is section a with x, y and section b with z.
    func snapshot(_ text: String) -> ResultsSnapshot<Row> {
        let sections = text.split(separator: "|").map { part -> ResultsSection<Row> in
            let halves = part.split(separator: ":", omittingEmptySubsequences: false)
            let items = halves[1].split(separator: " ").map { token -> Row in
                let id = String(token.prefix(1))
                return Row(id: id, value: Int(token.dropFirst()) ?? 0)
            }
            return ResultsSection(name: String(halves[0]), items: items)
        }
        return ResultsSnapshot(sections: sections)
    }

    func diff(_ old: String, _ new: String) -> (ResultsChangeSet, ResultsSnapshot<Row>, ResultsSnapshot<Row>) {
        let (a, b) = (snapshot(old), snapshot(new))
        let changes = ResultsDiff.changes(from: a, to: b)
        #expect(replay(changes, on: a, toward: b) == b, "replaying \(changes) on \(old) must give \(new)")
        return (changes, a, b)
    }

    func path(_ section: Int, _ item: Int) -> ItemPath { ItemPath(section: section, item: item) }

    @Test func identicalSnapshotsHaveNoChanges() {
        let (changes, _, _) = diff("a:x y z|b:w", "a:x y z|b:w")
        #expect(changes.isEmpty)
    }

    @Test func insertion() {
        let (changes, _, _) = diff("a:x z", "a:x y z")
        #expect(changes.inserted == [path(0, 1)])
        #expect(changes.deleted.isEmpty && changes.moved.isEmpty && changes.updated.isEmpty)
    }

    @Test func deletion() {
        let (changes, _, _) = diff("a:x y z", "a:x z")
        #expect(changes.deleted == [path(0, 1)])
        #expect(changes.inserted.isEmpty && changes.moved.isEmpty)
    }

    @Test func updateInPlaceIsReportedAtTheOldPath() {
        // Given y changed content while x before it was deleted
        let (changes, _, _) = diff("a:x y z", "a:y7 z")
        // Then the update names y where it was
        #expect(changes.updated == [path(0, 1)])
        #expect(changes.deleted == [path(0, 0)])
    }

    @Test func oneRecordMovedToTheEndIsOneMove() {
        let (changes, _, _) = diff("a:a b c d e", "a:b c d e a")
        #expect(changes.moved == [.init(from: path(0, 0), to: path(0, 4))])
        #expect(changes.inserted.isEmpty && changes.deleted.isEmpty)
    }

    @Test func oneRecordMovedToTheFrontIsOneMove() {
        let (changes, _, _) = diff("a:a b c d e", "a:e a b c d")
        #expect(changes.moved == [.init(from: path(0, 4), to: path(0, 0))])
    }

    @Test func swapIsOneMove() {
        let (changes, _, _) = diff("a:a b", "a:b a")
        #expect(changes.moved.count == 1)
    }

    @Test func movedAndChangedIsAMoveOnly() {
        let (changes, _, _) = diff("a:a b c", "a:b c a5")
        #expect(changes.moved == [.init(from: path(0, 0), to: path(0, 2))])
        #expect(changes.updated.isEmpty)
    }

    @Test func moveAcrossSections() {
        let (changes, _, _) = diff("a:x y|b:z", "a:x|b:y z")
        #expect(changes.moved == [.init(from: path(0, 1), to: path(1, 0))])
        #expect(changes.insertedSections.isEmpty && changes.deletedSections.isEmpty)
    }

    @Test func sectionInsertedCoversItsRecords() {
        let (changes, _, _) = diff("a:x", "a:x|b:y z")
        #expect(changes.insertedSections == [1])
        #expect(changes.inserted.isEmpty)
    }

    @Test func sectionDeletedCoversItsRecords() {
        let (changes, _, _) = diff("a:x|b:y z|c:w", "a:x|c:w")
        #expect(changes.deletedSections == [1])
        #expect(changes.deleted.isEmpty)
    }

    @Test func recordLeavingForANewSectionIsADeletion() {
        // y moves from a into the new section b: b's insertion covers it
        let (changes, _, _) = diff("a:x y", "a:x|b:y")
        #expect(changes.insertedSections == [1])
        #expect(changes.deleted == [path(0, 1)])
        #expect(changes.moved.isEmpty)
    }

    @Test func sectionMoveIsADeletionAndAnInsertion() {
        // Given the sort order put section c first
        let (changes, _, _) = diff("a:x|b:y|c:z", "c:z|a:x|b:y")
        // Then c is deleted at its old index and inserted at its new one
        #expect(changes.deletedSections == [2])
        #expect(changes.insertedSections == [0])
        #expect(changes.moved.isEmpty && changes.inserted.isEmpty && changes.deleted.isEmpty)
    }

    @Test func sectionsSwapped() {
        let (changes, _, _) = diff("a:x y|b:z", "b:z y|a:x")
        #expect(changes.deletedSections.count == 1 && changes.insertedSections.count == 1)
    }

    @Test func everythingAtOnce() {
        _ = diff("a:a b c|b:d e|c:f g", "b:e d2 h|a:c a b9|d:i")
    }

    @Test func fromAndToEmpty() {
        let (grow, _, _) = diff("", "a:x y|b:z")
        #expect(grow.insertedSections == [0, 1])
        let (shrink, _, _) = diff("a:x y|b:z", "")
        #expect(shrink.deletedSections == [0, 1])
    }

    /// Random edits of random snapshots: every change set must replay exactly.
    @Test(arguments: 0..<200)
    func randomEditsReplayExactly(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        let alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".map(String.init)
        func randomSnapshot() -> ResultsSnapshot<Row> {
            let ids = alphabet.shuffled(using: &random).prefix(Int.random(in: 0...30, using: &random))
            var sections: [ResultsSection<Row>] = []
            for id in ids {
                let name = ["s1", "s2", "s3", "s4"].randomElement(using: &random)!
                let row = Row(id: id, value: Int.random(in: 0...2, using: &random))
                if let i = sections.firstIndex(where: { $0.name == name }) {
                    sections[i].items.append(row)
                } else {
                    sections.append(ResultsSection(name: name, items: [row]))
                }
            }
            return ResultsSnapshot(sections: sections)
        }
        let old = randomSnapshot()
        let new = randomSnapshot()
        let changes = ResultsDiff.changes(from: old, to: new)
        #expect(replay(changes, on: old, toward: new) == new)
    }
}
