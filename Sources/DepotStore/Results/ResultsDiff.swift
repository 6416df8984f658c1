/// Computes the change set between two snapshots in O(n), Heckel-style.
///
/// Like Paul Heckel's 1978 algorithm, records are matched by identity through
/// hash tables (one pass over each side), not by searching for a longest common
/// subsequence. `CollectionDifference` needs O(n·d) comparisons and knows no
/// identity: it reports an edited row as a removal and an insertion.
///
/// Moves are found by walking the records that stayed in the same section in old
/// and new order at once. When the two walks disagree, the record that jumped
/// further is the one that moved (the other stays in place). Each step advances
/// one walk, so this is linear too. It is not guaranteed to find the fewest moves,
/// but it finds one for a single record moved anywhere, and the records it keeps
/// in place are always in the same relative order on both sides, so the change
/// set is always valid to apply.
///
/// Everything here is `@inlinable`: a generic diff that is not specialized for
/// the record type runs about ten times slower (every hash and comparison goes
/// through witness tables), so the app's module must be able to specialize it.
@usableFromInline
enum ResultsDiff {
    /// Builds the next snapshot from fetched rows and diffs it against the previous one.
    @usableFromInline
    typealias Refresh<Record: Sendable> = @Sendable (_ rows: [Record], _ previous: ResultsSnapshot<Record>) -> (ResultsSnapshot<Record>, ResultsChangeSet)

    /// A refresh specialized for `Record`, made where the record type is concrete.
    @inlinable
    static func refresh<Record: Identifiable & Equatable & Sendable>(sectionKey: (@Sendable (Record) -> String)?) -> Refresh<Record> {
        { rows, previous in
            let next = ResultsSnapshot(rows: rows, sectionKey: sectionKey)
            return (next, changes(from: previous, to: next))
        }
    }

    @inlinable
    static func changes<Record: Identifiable & Equatable & Sendable>(
        from old: ResultsSnapshot<Record>,
        to new: ResultsSnapshot<Record>
    ) -> ResultsChangeSet {
        var changes = ResultsChangeSet()

        // 1. Sections, by name: the ones kept in relative order survive; the rest
        //    are deleted and inserted.
        let oldNames = old.sections.map(\.name)
        let newNames = new.sections.map(\.name)
        let (keptSections, _) = inPlace(old: oldNames, new: newNames)
        var newSectionOfOld = [Int?](repeating: nil, count: oldNames.count)
        var survivingNew = [Bool](repeating: false, count: newNames.count)
        for (oldIndex, newIndex) in keptSections {
            newSectionOfOld[oldIndex] = newIndex
            survivingNew[newIndex] = true
        }
        changes.deletedSections = oldNames.indices.filter { newSectionOfOld[$0] == nil }
        changes.insertedSections = newNames.indices.filter { !survivingNew[$0] }

        // 2. Where every record is now.
        var newPaths: [Record.ID: ItemPath] = [:]
        newPaths.reserveCapacity(new.count)
        for (s, section) in new.sections.enumerated() where survivingNew[s] {
            for (i, record) in section.items.enumerated() {
                newPaths[record.id] = ItemPath(section: s, item: i)
            }
        }
        // For each old record in a surviving section: its path, and its candidate
        // number if it stayed in its section (-1 otherwise).
        var oldPaths: [Record.ID: (path: ItemPath, candidate: Int)] = [:]
        oldPaths.reserveCapacity(old.count)

        // 3. Old records: gone (or gone into a new section), moved to another
        //    section, or candidates to stay in place. Candidates are numbered in
        //    old order; from here on they are handled by number, without hashing.
        var candidateFrom: [ItemPath] = []
        var candidateTo: [ItemPath] = []
        var candidatesBySection: [[Int]] = Array(repeating: [], count: newNames.count)
        for (s, section) in old.sections.enumerated() {
            guard let target = newSectionOfOld[s] else { continue }
            for (i, record) in section.items.enumerated() {
                let from = ItemPath(section: s, item: i)
                guard let to = newPaths[record.id] else {
                    oldPaths[record.id] = (from, -1)
                    changes.deleted.append(from)
                    continue
                }
                if to.section == target {
                    let candidate = candidateFrom.count
                    candidateFrom.append(from)
                    candidateTo.append(to)
                    candidatesBySection[target].append(candidate)
                    oldPaths[record.id] = (from, candidate)
                } else {
                    oldPaths[record.id] = (from, -1)
                    changes.moved.append(.init(from: from, to: to))
                }
            }
        }

        // 4. New records in surviving sections that were not in a surviving old
        //    section are insertions; the candidates are listed in new order.
        var newOrderBySection: [[Int]] = Array(repeating: [], count: newNames.count)
        for (s, section) in new.sections.enumerated() where survivingNew[s] {
            for (i, record) in section.items.enumerated() {
                if let entry = oldPaths[record.id] {
                    if entry.candidate >= 0 { newOrderBySection[s].append(entry.candidate) }
                } else {
                    changes.inserted.append(ItemPath(section: s, item: i))
                }
            }
        }

        // 5. Within each surviving section: in place (maybe updated) or moved.
        var moved = [Bool](repeating: false, count: candidateFrom.count)
        for s in new.sections.indices where survivingNew[s] && !candidatesBySection[s].isEmpty {
            markMoves(old: candidatesBySection[s], new: newOrderBySection[s], moved: &moved)
            for candidate in candidatesBySection[s] {
                let from = candidateFrom[candidate]
                let to = candidateTo[candidate]
                if moved[candidate] {
                    changes.moved.append(.init(from: from, to: to))
                } else if old[from] != new[to] {
                    changes.updated.append(from)
                }
            }
        }

        changes.deleted.sort()
        changes.updated.sort()
        changes.moved.sort { $0.to < $1.to }
        return changes
    }

    /// The two-cursor walk of ``inPlace(old:new:)`` over candidate numbers: `old`
    /// and `new` hold the same numbers in two orders; the ones that moved are
    /// flagged in `moved`. Arrays only, no hashing.
    @inlinable
    static func markMoves(old: [Int], new: [Int], moved: inout [Bool]) {
        guard let largest = old.max() else { return }
        let smallest = old.min()!
        var oldPosition = [Int](repeating: 0, count: largest - smallest + 1)
        var newPosition = [Int](repeating: 0, count: largest - smallest + 1)
        for (i, candidate) in old.enumerated() { oldPosition[candidate - smallest] = i }
        for (j, candidate) in new.enumerated() { newPosition[candidate - smallest] = j }
        var i = 0
        var j = 0
        while i < old.count, j < new.count {
            if moved[old[i]] { i += 1; continue }
            if moved[new[j]] { j += 1; continue }
            if old[i] == new[j] {
                i += 1
                j += 1
                continue
            }
            let oldJump = newPosition[old[i] - smallest] - j
            let newJump = oldPosition[new[j] - smallest] - i
            if oldJump > newJump {
                moved[old[i]] = true
                i += 1
            } else {
                moved[new[j]] = true
                j += 1
            }
        }
    }

    /// Matches two orderings of the same elements (or of overlapping sets, for
    /// section names) with two cursors. Returns the pairs kept in place (old index,
    /// new index) and the elements present on both sides that moved.
    @inlinable
    static func inPlace<Element: Hashable>(old: [Element], new: [Element]) -> (kept: [(Int, Int)], moved: Set<Element>) {
        var newIndex: [Element: Int] = [:]
        newIndex.reserveCapacity(new.count)
        for (i, element) in new.enumerated() { newIndex[element] = i }
        var oldIndex: [Element: Int] = [:]
        oldIndex.reserveCapacity(old.count)
        for (i, element) in old.enumerated() where newIndex[element] != nil { oldIndex[element] = i }

        // Elements on one side only take no part in the walk.
        var skipOld = old.map { newIndex[$0] == nil }
        var skipNew = new.map { oldIndex[$0] == nil }
        var kept: [(Int, Int)] = []
        var moved = Set<Element>()
        var i = 0
        var j = 0
        while i < old.count, j < new.count {
            if skipOld[i] { i += 1; continue }
            if skipNew[j] { j += 1; continue }
            if old[i] == new[j] {
                kept.append((i, j))
                i += 1
                j += 1
                continue
            }
            // Both are unmatched, so each lies ahead of the other cursor.
            let oldJump = newIndex[old[i]]! - j
            let newJump = oldIndex[new[j]]! - i
            if oldJump > newJump {
                moved.insert(old[i])
                skipNew[newIndex[old[i]]!] = true
                i += 1
            } else {
                moved.insert(new[j])
                skipOld[oldIndex[new[j]]!] = true
                j += 1
            }
        }
        return (kept, moved)
    }
}

extension ResultsChangeSet {
    /// The changes that turn `old` into `new`, with records matched by identity,
    /// computed in O(n). ``ResultsController`` uses this for every delivery; use it
    /// to diff snapshots of your own.
    @inlinable
    public init<Record: Identifiable & Equatable & Sendable>(from old: ResultsSnapshot<Record>, to new: ResultsSnapshot<Record>) {
        self = ResultsDiff.changes(from: old, to: new)
    }
}
