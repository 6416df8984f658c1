@testable import DepotStore

/// Applies a change set to the old snapshot the way a table view applies a batch
/// update, taking new content from the new snapshot, and returns the result.
/// A correct change set makes this equal to `new`. A change set whose paths do
/// not fit the old snapshot gives `nil`, where a table view would throw its
/// inconsistency exception.
func replay<Record: Identifiable & Equatable & Sendable>(
    _ changes: ResultsChangeSet,
    on old: ResultsSnapshot<Record>,
    toward new: ResultsSnapshot<Record>
) -> ResultsSnapshot<Record>? {
    var sections = old.sections
    let newByID = Dictionary(new.fetchedObjects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    func fits(_ path: ItemPath, _ sections: [ResultsSection<Record>], inserting: Bool = false) -> Bool {
        sections.indices.contains(path.section) && path.item >= 0
            && path.item < sections[path.section].items.count + (inserting ? 1 : 0)
    }

    // Updates are addressed in old coordinates: resolve them to identities first.
    guard changes.updated.allSatisfy({ fits($0, old.sections) }) else { return nil }
    let updatedIDs = changes.updated.map { old[$0].id }

    // 1. Remove deleted and moved-away records (old paths), from the back.
    let removals = (changes.deleted + changes.moved.map(\.from)).sorted(by: >)
    for path in removals {
        guard fits(path, sections) else { return nil }
        sections[path.section].items.remove(at: path.item)
    }
    // 2. Remove deleted sections (old indices), from the back.
    for index in changes.deletedSections.sorted(by: >) {
        guard sections.indices.contains(index) else { return nil }
        sections.remove(at: index)
    }
    // 3. Insert new sections (new indices), whole, from the front.
    for index in changes.insertedSections.sorted() {
        guard new.sections.indices.contains(index), index <= sections.count else { return nil }
        sections.insert(new.sections[index], at: index)
    }
    // 4. Insert inserted and moved-in records (new paths), from the front.
    let insertions = (changes.inserted + changes.moved.map(\.to)).sorted()
    for path in insertions {
        guard fits(path, new.sections), fits(path, sections, inserting: true) else { return nil }
        sections[path.section].items.insert(new[path], at: path.item)
    }
    // 5. Apply updates by identity.
    for id in updatedIDs {
        for s in sections.indices {
            if let i = sections[s].items.firstIndex(where: { $0.id == id }) {
                sections[s].items[i] = newByID[id]!
            }
        }
    }
    return ResultsSnapshot(sections: sections)
}
