import DepotStore
import Foundation

extension FuzzTargets {
    /// A record of the fuzzed snapshots: an identity and a content.
    struct Row: Identifiable, Equatable, Sendable, CustomStringConvertible {
        var id: UInt8
        var value: UInt8
        var description: String { value == 0 ? "\(id)" : "\(id)~\(value)" }
    }

    /// `ResultsDiff.changes(from:to:)` (through the public
    /// `ResultsChangeSet(from:to:)`) between two snapshots made from the bytes.
    ///
    /// The first byte is where the old snapshot's bytes end (`1 + byte`, capped
    /// to the input); the rest make the new one. In each half, a byte from 0xC0
    /// up starts the section named by its low three bits (a name already used in
    /// that snapshot is ignored, as names are unique); any other byte is a
    /// record, identity `byte & 0x3F`, content `byte >> 6`, added to the current
    /// section (`""` before the first), unless that identity is already in the
    /// snapshot. The first byte's top bit chooses how the snapshots are made:
    /// from those sections, empty ones included; or, as `ResultsController`
    /// makes them, from the records in order with the section names as the
    /// section key.
    ///
    /// Invariants: applying the change set to the old snapshot the way a table
    /// view applies a batch update gives exactly the new one; its lists are in
    /// the documented order; diffing a snapshot with itself gives no change.
    static func resultsDiff(_ data: Data) {
        guard let first = data.first else { return }
        let bytes = Array(data.dropFirst())
        let split = min(Int(first & 0x7F), bytes.count)
        let bySectionKey = first & 0x80 != 0
        let old = snapshot(bytes[..<split], bySectionKey: bySectionKey)
        let new = snapshot(bytes[split...], bySectionKey: bySectionKey)
        let changes = ResultsChangeSet(from: old, to: new)
        let story = "\(describe(old)) → \(describe(new)): \(changes.details)"

        check(changes.deletedSections == changes.deletedSections.sorted(), "results-diff", "deleted sections out of order: \(story)")
        check(changes.insertedSections == changes.insertedSections.sorted(), "results-diff", "inserted sections out of order: \(story)")
        check(changes.deleted == changes.deleted.sorted(), "results-diff", "deletions out of order: \(story)")
        check(changes.inserted == changes.inserted.sorted(), "results-diff", "insertions out of order: \(story)")
        check(changes.updated == changes.updated.sorted(), "results-diff", "updates out of order: \(story)")
        check(changes.moved.map(\.to) == changes.moved.map(\.to).sorted(), "results-diff", "moves not ordered by destination: \(story)")
        switch ResultsReplay.apply(changes, to: old, toward: new) {
        case .success(let replayed):
            check(replayed == new, "results-diff", "replaying gives \(describe(replayed)), not the new snapshot: \(story)")
        case .failure(let reason):
            fail("results-diff", "the change set does not apply (\(reason)): \(story)")
        }
        check(ResultsChangeSet(from: old, to: old).isEmpty, "results-diff", "\(describe(old)) differs from itself")
        check(ResultsChangeSet(from: new, to: new).isEmpty, "results-diff", "\(describe(new)) differs from itself")
    }

    /// The snapshot that `bytes` describe (see ``resultsDiff(_:)``).
    static func snapshot(_ bytes: ArraySlice<UInt8>, bySectionKey: Bool) -> ResultsSnapshot<Row> {
        var sections: [ResultsSection<Row>] = []
        var seenIDs = Set<UInt8>()
        var names = Set<String>()
        for byte in bytes {
            if byte >= 0xC0 {
                let name = "s\(byte & 0x07)"
                if names.insert(name).inserted { sections.append(ResultsSection(name: name, items: [])) }
                continue
            }
            let row = Row(id: byte & 0x3F, value: byte >> 6)
            guard seenIDs.insert(row.id).inserted else { continue }
            if sections.isEmpty {
                names.insert("")
                sections.append(ResultsSection(name: "", items: []))
            }
            sections[sections.count - 1].items.append(row)
        }
        guard bySectionKey else { return ResultsSnapshot(sections: sections) }
        // The same records in the same order, each tagged with its section's name.
        let tagged = sections.flatMap { section in section.items.map { (section.name, $0) } }
        let nameOf = Dictionary(tagged.map { ($0.1.id, $0.0) }, uniquingKeysWith: { first, _ in first })
        return ResultsSnapshot(rows: tagged.map(\.1), sectionKey: { nameOf[$0.id] ?? "" })
    }

    /// `s1:[1 2~1] s2:[]`, for failure messages.
    static func describe(_ snapshot: ResultsSnapshot<Row>) -> String {
        let sections = snapshot.sections.map { "\($0.name.isEmpty ? "\"\"" : $0.name):[\($0.items.map(\.description).joined(separator: " "))]" }
        return sections.isEmpty ? "(empty)" : sections.joined(separator: " ")
    }
}

extension ResultsChangeSet {
    /// Every list of the change set, for failure messages.
    var details: String {
        "-sections \(deletedSections) +sections \(insertedSections) -\(deleted) +\(inserted) ~\(updated) moved \(moved)"
    }
}
