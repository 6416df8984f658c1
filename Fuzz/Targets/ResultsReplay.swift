import DepotStore

/// Applies a change set to the old snapshot the way a table view applies a
/// batch update: the oracle of the `results-diff` target.
///
/// The same steps as `Tests/DepotStoreTests/Support/Replay.swift`, written
/// again here so that the fuzz target depends on no test target, and saying
/// which step failed. A correct change set gives exactly the new snapshot.
///
/// For example:
///
/// ```swift
/// let changes = ResultsChangeSet(from: old, to: new)
/// let replayed = try ResultsReplay.apply(changes, to: old, toward: new).get()  // == new
/// ```
enum ResultsReplay {
    /// Why a change set could not be applied: where a table view would raise its
    /// inconsistency exception.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The old snapshot with `changes` applied, taking new content from `new`;
    /// a failure when a path does not fit the snapshot it addresses.
    static func apply<Record: Identifiable & Equatable & Sendable>(
        _ changes: ResultsChangeSet,
        to old: ResultsSnapshot<Record>,
        toward new: ResultsSnapshot<Record>
    ) -> Result<ResultsSnapshot<Record>, Failure> {
        var sections = old.sections
        func fits(_ path: ItemPath, _ sections: [ResultsSection<Record>], inserting: Bool = false) -> Bool {
            sections.indices.contains(path.section) && path.item >= 0
                && path.item < sections[path.section].items.count + (inserting ? 1 : 0)
        }

        // Updates are addressed in old coordinates: resolve them to identities first.
        if let bad = changes.updated.first(where: { !fits($0, old.sections) }) {
            return .failure(Failure(description: "update \(bad) is not in the old snapshot"))
        }
        let updatedIDs = changes.updated.map { old[$0].id }

        // 1. Remove deleted and moved-away records (old paths), from the back.
        let removals = (changes.deleted + changes.moved.map(\.from)).sorted(by: >)
        if Set(removals).count != removals.count {
            return .failure(Failure(description: "an old path is removed twice: \(removals)"))
        }
        for path in removals {
            guard fits(path, sections) else { return .failure(Failure(description: "removal \(path) is not in the old snapshot")) }
            sections[path.section].items.remove(at: path.item)
        }
        // 2. Remove deleted sections (old indices), from the back.
        for index in changes.deletedSections.sorted(by: >) {
            guard sections.indices.contains(index) else { return .failure(Failure(description: "deleted section \(index) does not exist")) }
            sections.remove(at: index)
        }
        // 3. Insert new sections (new indices), whole, from the front.
        for index in changes.insertedSections.sorted() {
            guard new.sections.indices.contains(index), index <= sections.count else {
                return .failure(Failure(description: "inserted section \(index) does not fit"))
            }
            sections.insert(new.sections[index], at: index)
        }
        // 4. Insert inserted and moved-in records (new paths), from the front.
        let insertions = (changes.inserted + changes.moved.map(\.to)).sorted()
        for path in insertions {
            guard fits(path, new.sections), fits(path, sections, inserting: true) else {
                return .failure(Failure(description: "insertion \(path) does not fit"))
            }
            sections[path.section].items.insert(new[path], at: path.item)
        }
        // 5. Apply updates by identity, with the new content.
        let newByID = Dictionary(new.fetchedObjects.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for id in updatedIDs {
            guard let content = newByID[id] else { return .failure(Failure(description: "updated record \(id) is not in the new snapshot")) }
            for s in sections.indices {
                if let i = sections[s].items.firstIndex(where: { $0.id == id }) { sections[s].items[i] = content }
            }
        }
        return .success(ResultsSnapshot(sections: sections))
    }
}
