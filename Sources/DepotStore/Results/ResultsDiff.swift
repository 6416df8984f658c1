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
enum ResultsDiff {
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
        var oldPaths: [Record.ID: ItemPath] = [:]
        oldPaths.reserveCapacity(old.count)

        // 3. Old records: gone (or gone into a new section), moved to another
        //    section, or candidates to stay in place.
        var candidates: [[Record.ID]] = Array(repeating: [], count: newNames.count)
        for (s, section) in old.sections.enumerated() {
            guard let target = newSectionOfOld[s] else { continue }
            for (i, record) in section.items.enumerated() {
                let from = ItemPath(section: s, item: i)
                oldPaths[record.id] = from
                guard let to = newPaths[record.id] else {
                    changes.deleted.append(from)
                    continue
                }
                if to.section == target {
                    candidates[target].append(record.id)
                } else {
                    changes.moved.append(.init(from: from, to: to))
                }
            }
        }

        // 4. New records in surviving sections that were not in a surviving old section.
        for (s, section) in new.sections.enumerated() where survivingNew[s] {
            for (i, record) in section.items.enumerated() where oldPaths[record.id] == nil {
                changes.inserted.append(ItemPath(section: s, item: i))
            }
        }

        // 5. Within each surviving section: in place (maybe updated) or moved.
        for (s, section) in new.sections.enumerated() where survivingNew[s] {
            let oldOrder = candidates[s]
            guard !oldOrder.isEmpty else { continue }
            var newOrder: [Record.ID] = []
            newOrder.reserveCapacity(oldOrder.count)
            for record in section.items {
                if let from = oldPaths[record.id], newSectionOfOld[from.section] == s {
                    newOrder.append(record.id)
                }
            }
            let (_, movedIDs) = inPlace(old: oldOrder, new: newOrder)
            for id in oldOrder {
                let from = oldPaths[id]!
                let to = newPaths[id]!
                if movedIDs.contains(id) {
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

    /// Matches two orderings of the same elements (or of overlapping sets, for
    /// section names) with two cursors. Returns the pairs kept in place (old index,
    /// new index) and the elements present on both sides that moved.
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
