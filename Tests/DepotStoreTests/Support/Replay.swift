@testable import DepotStore

/// Applies a change set to the old snapshot the way a table view applies a batch
/// update, taking new content from the new snapshot, and returns the result.
/// A correct change set makes this equal to `new`.
func replay<Record: Identifiable & Equatable & Sendable>(
    _ changes: ResultsChangeSet,
    on old: ResultsSnapshot<Record>,
    toward new: ResultsSnapshot<Record>
) -> ResultsSnapshot<Record> {
    var sections = old.sections
    let newByID = Dictionary(new.fetchedObjects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })

    // Updates are addressed in old coordinates: resolve them to identities first.
    let updatedIDs = changes.updated.map { old[$0].id }

    // 1. Remove deleted and moved-away records (old paths), from the back.
    let removals = (changes.deleted + changes.moved.map(\.from)).sorted(by: >)
    for path in removals {
        sections[path.section].items.remove(at: path.item)
    }
    // 2. Remove deleted sections (old indices), from the back.
    for index in changes.deletedSections.sorted(by: >) {
        sections.remove(at: index)
    }
    // 3. Insert new sections (new indices), whole, from the front.
    for index in changes.insertedSections.sorted() {
        sections.insert(new.sections[index], at: index)
    }
    // 4. Insert inserted and moved-in records (new paths), from the front.
    let insertions = (changes.inserted + changes.moved.map(\.to)).sorted()
    for path in insertions {
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
