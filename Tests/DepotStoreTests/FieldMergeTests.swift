import Depot
import DepotStore
import Foundation
import Testing

/// The built-in three-way merge, row by row of its table.
struct FieldMergeTests {
    struct Contact: Codable, Sendable, Equatable {
        var name: String
        var email: String?
        var tags: [String] = []
    }

    let base = Contact(name: "Ann", email: "ann@a.io", tags: ["x"])

    func merged(_ mine: Contact, _ theirs: Contact) throws -> Contact? {
        if case .merged(let record) = try FieldMerge.merge(base: base, mine: mine, theirs: theirs) { return record }
        return nil
    }

    @Test func fieldsChangedOnOneSideEachAreBothKept() throws {
        let mine = Contact(name: "Anna", email: "ann@a.io", tags: ["x"])
        let theirs = Contact(name: "Ann", email: "ann@b.io", tags: ["x", "y"])
        #expect(try merged(mine, theirs) == Contact(name: "Anna", email: "ann@b.io", tags: ["x", "y"]))
    }

    @Test func aFieldChangedToTheSameValueOnBothSidesIsNoConflict() throws {
        let both = Contact(name: "Anna", email: nil, tags: ["x"])
        #expect(try merged(both, both) == both)
    }

    @Test func aFieldChangedOnBothSidesToDifferentValuesIsAConflict() throws {
        let mine = Contact(name: "Anna", email: "anna@a.io", tags: ["x"])
        let theirs = Contact(name: "Ann", email: "ann@b.io", tags: ["x"])
        guard case .conflicting(let fields) = try FieldMerge.merge(base: base, mine: mine, theirs: theirs) else {
            Issue.record("merged a field both sides changed")
            return
        }
        #expect(fields == [FieldConflict(field: "email", base: "ann@a.io", mine: "anna@a.io", theirs: "ann@b.io")])
        #expect(fields.first?.description == "email: ann@a.io → anna@a.io | ann@b.io")
    }

    @Test func aClearedFieldCountsAsAChange() throws {
        // Mine cleared the e-mail, theirs changed it: a conflict whose mine is "none".
        let mine = Contact(name: "Ann", email: nil, tags: ["x"])
        let theirs = Contact(name: "Ann", email: "ann@b.io", tags: ["x"])
        guard case .conflicting(let fields) = try FieldMerge.merge(base: base, mine: mine, theirs: theirs) else {
            Issue.record("merged a field both sides changed")
            return
        }
        #expect(fields == [FieldConflict(field: "email", base: "ann@a.io", mine: nil, theirs: "ann@b.io")])
        // Cleared on one side only: cleared.
        #expect(try merged(mine, base) == mine)
    }

    @Test func aNestedValueIsOneField() throws {
        let mine = Contact(name: "Ann", email: "ann@a.io", tags: ["x", "m"])
        let theirs = Contact(name: "Ann", email: "ann@a.io", tags: ["t", "x"])
        guard case .conflicting(let fields) = try FieldMerge.merge(base: base, mine: mine, theirs: theirs) else {
            Issue.record("merged a list both sides changed")
            return
        }
        #expect(fields.map(\.field) == ["tags"])
        #expect(fields.first?.mine == #"["x","m"]"#)
    }

    @Test func keepingMineTakesMyChangedFieldsAndTheirOthers() throws {
        let mine = Contact(name: "Anna", email: "anna@a.io", tags: ["x"])
        let theirs = Contact(name: "Ann", email: "ann@b.io", tags: ["t"])
        #expect(try FieldMerge.keepingMine(base: base, mine: mine, theirs: theirs) == Contact(name: "Anna", email: "anna@a.io", tags: ["t"]))
    }

    @Test func theDefaultResolutionRebasesMergesAndKeepsConflictsAndDeletions() throws {
        func resolution(_ mine: Contact, _ theirs: Contact?) -> String {
            let conflict = EditConflict(
                record: RecordKey("contact", 1), baseVersion: RecordVersion(1), base: base, mine: mine,
                theirs: theirs.map { ServerRecord(version: RecordVersion(2), fields: $0) })
            switch ConflictResolution.merge(conflict) {
            case .rebase(let fields): return "rebase \(fields.name) \(fields.email ?? "-")"
            case .acceptServer: return "accept"
            case .keepForUser: return "keep"
            }
        }
        #expect(resolution(Contact(name: "Anna", email: "ann@a.io", tags: ["x"]), Contact(name: "Ann", email: "b@b.io", tags: ["x"])) == "rebase Anna b@b.io")
        #expect(resolution(Contact(name: "Ann", email: "c@a.io", tags: ["x"]), Contact(name: "Ann", email: "b@b.io", tags: ["x"])) == "keep")
        #expect(resolution(Contact(name: "Anna", email: "ann@a.io", tags: ["x"]), nil) == "keep")
    }

    @Test func recordVersionsOrderCountersButNotOpaqueTags() {
        #expect(RecordVersion(3).entityTag == "\"3\"")
        #expect(RecordVersion(3).isOlder(than: RecordVersion(4)))
        #expect(!RecordVersion(4).isOlder(than: RecordVersion(3)))
        #expect(!RecordVersion(entityTag: "\"a\"").isOlder(than: RecordVersion(4)))
        #expect(!RecordVersion(3).isOlder(than: RecordVersion(entityTag: "W/\"z\"")))
    }
}
