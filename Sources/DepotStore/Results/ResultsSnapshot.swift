/// A position in sectioned results: a section index and an item index in it.
public struct ItemPath: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The section index.
    public var section: Int
    /// The item index within the section.
    public var item: Int

    /// Makes a path.
    public init(section: Int, item: Int) {
        self.section = section
        self.item = item
    }

    public static func < (lhs: ItemPath, rhs: ItemPath) -> Bool {
        (lhs.section, lhs.item) < (rhs.section, rhs.item)
    }

    public var description: String { "[\(section), \(item)]" }
}

/// One section of results: its name and its records, in order.
public struct ResultsSection<Record: Sendable>: Sendable {
    /// The section's name: the value of the section key, or `""` when results are not sectioned.
    public var name: String
    /// The section's records, in the request's order.
    public var items: [Record]

    /// Makes a section.
    public init(name: String, items: [Record]) {
        self.name = name
        self.items = items
    }
}

extension ResultsSection: Equatable where Record: Equatable {}

/// The results at one moment: sections of records, as the view layer shows them.
///
/// Sections appear in the order their first record appears in the request's
/// order, so sort by the section key first (as with NSFetchedResultsController)
/// to keep each section's records together in the fetch.
public struct ResultsSnapshot<Record: Sendable>: Sendable {
    /// The sections, in order.
    public let sections: [ResultsSection<Record>]

    /// Makes a snapshot from rows in the request's order.
    ///
    /// - Parameters:
    ///   - rows: The fetched records.
    ///   - sectionKey: The section name of a record, or `nil` for a single unnamed section.
    @inlinable
    public init(rows: [Record], sectionKey: (@Sendable (Record) -> String)?) {
        guard let sectionKey else {
            sections = rows.isEmpty ? [] : [ResultsSection(name: "", items: rows)]
            return
        }
        var sections: [ResultsSection<Record>] = []
        var indexByName: [String: Int] = [:]
        for row in rows {
            let name = sectionKey(row)
            // Fast path: rows sorted by section arrive in runs.
            if let last = sections.indices.last, sections[last].name == name {
                sections[last].items.append(row)
            } else if let index = indexByName[name] {
                sections[index].items.append(row)
            } else {
                indexByName[name] = sections.count
                sections.append(ResultsSection(name: name, items: [row]))
            }
        }
        self.sections = sections
    }

    /// Makes a snapshot from sections.
    @inlinable
    public init(sections: [ResultsSection<Record>]) {
        self.sections = sections
    }

    /// An empty snapshot.
    @inlinable
    public static var empty: ResultsSnapshot { ResultsSnapshot(sections: []) }

    /// Every record, section after section.
    @inlinable
    public var fetchedObjects: [Record] {
        sections.count == 1 ? sections[0].items : sections.flatMap(\.items)
    }

    /// The number of records.
    @inlinable
    public var count: Int {
        sections.reduce(0) { $0 + $1.items.count }
    }

    /// Whether there are no records.
    public var isEmpty: Bool { sections.allSatisfy(\.items.isEmpty) }

    /// The record at `path`.
    @inlinable
    public subscript(path: ItemPath) -> Record {
        sections[path.section].items[path.item]
    }
}

extension ResultsSnapshot: Equatable where Record: Equatable {}

/// What changed between two snapshots, in the shape table and collection views
/// apply in one batch update (and NSFetchedResultsController reports):
///
/// - `deletedSections`, `deleted`, `updated` and each move's `from` are positions
///   in the OLD snapshot;
/// - `insertedSections`, `inserted` and each move's `to` are positions in the
///   NEW snapshot.
///
/// The records of an inserted or deleted section are not listed one by one: the
/// section change covers them, as UIKit's batch updates require. So the first
/// rows after an empty start arrive as `insertedSections: [0]` alone (printed
/// `+sections [0]`): an empty snapshot has no sections, and section 0 comes with
/// its rows. Likewise the last rows to go arrive as `deletedSections: [0]`.
///
/// A record that changed its content in place is in `updated`; a record that
/// moved is only in `moved` (configure its cell at `to`, with the new content).
/// Records are matched by identity (`Identifiable.id`): a record whose id
/// changes is a deletion and an insertion. A row written optimistically under
/// a local id and committed with the server's id therefore keeps the local id
/// as its identity (the server's id in a column of its own), so that the
/// commit reaches the screen as one update of the same row (<doc:OfflineWrites>).
public struct ResultsChangeSet: Sendable, Hashable, CustomStringConvertible {
    /// A record that changed position.
    public struct Move: Sendable, Hashable, CustomStringConvertible {
        /// Where it was, in the old snapshot.
        public var from: ItemPath
        /// Where it is, in the new snapshot.
        public var to: ItemPath

        /// Makes a move.
        public init(from: ItemPath, to: ItemPath) {
            self.from = from
            self.to = to
        }

        public var description: String { "\(from)→\(to)" }
    }

    /// Sections removed, by old index, ascending.
    public var deletedSections: [Int] = []
    /// Sections added, by new index, ascending.
    public var insertedSections: [Int] = []
    /// Records removed, by old path, ascending.
    public var deleted: [ItemPath] = []
    /// Records added, by new path, ascending.
    public var inserted: [ItemPath] = []
    /// Records whose content changed in place, by old path, ascending.
    public var updated: [ItemPath] = []
    /// Records that changed position, ordered by their new path.
    public var moved: [Move] = []

    /// Makes an empty change set.
    public init() {}

    /// Whether nothing changed.
    public var isEmpty: Bool {
        deletedSections.isEmpty && insertedSections.isEmpty && deleted.isEmpty
            && inserted.isEmpty && updated.isEmpty && moved.isEmpty
    }

    public var description: String {
        var parts: [String] = []
        if !deletedSections.isEmpty { parts.append("-sections \(deletedSections)") }
        if !insertedSections.isEmpty { parts.append("+sections \(insertedSections)") }
        if !deleted.isEmpty { parts.append("-\(deleted.count)") }
        if !inserted.isEmpty { parts.append("+\(inserted.count)") }
        if !updated.isEmpty { parts.append("~\(updated.count)") }
        if !moved.isEmpty { parts.append("↕\(moved.count)") }
        return parts.isEmpty ? "no changes" : parts.joined(separator: " ")
    }
}
