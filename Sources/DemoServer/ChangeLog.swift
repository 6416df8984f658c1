/// The numbered changes of one collection: each change gets the next number of
/// one increasing sequence (the first is 1; sequence 0 is the state the
/// collection starts in), and the last ``capacity`` changes are kept so that a
/// client can ask for what it missed.
///
/// A pure value with no I/O: ``ChangeFeed`` keeps it under the same lock as the
/// collection it numbers, and ``EventStream`` and the `/changes` routes read it.
///
/// For example:
///
/// ```swift
/// var log = ChangeLog<String>(capacity: 2)
/// log.record("a"); log.record("b"); log.record("c")   // 1, 2, 3
/// log.changes(after: 1, limit: 10)?.changes.map(\.seq) // [2, 3]
/// log.changes(after: 0, limit: 10)                    // nil: change 1 is gone
/// ```
struct ChangeLog<Change: Sendable>: Sendable {
    /// One numbered change.
    struct Entry: Sendable {
        /// Its number in the sequence.
        var seq: Int
        /// What changed.
        var change: Change
    }

    /// A run of changes after a given number, in sequence order.
    struct Page: Sendable {
        /// At most the limit asked for.
        var changes: [Entry]
        /// The number of the last change in the page; the number asked after when it is empty.
        var cursor: Int
        /// Whether changes after ``cursor`` exist.
        var more: Bool
    }

    /// How many changes are kept by default (``DemoServer/Configuration/changeHistory``).
    static var defaultCapacity: Int { 1_000 }

    /// The number of the latest change; 0 before any.
    private(set) var sequence = 0
    /// How many of the latest changes are kept.
    private(set) var capacity: Int
    /// The kept changes from index `start` on: `storage[start...]` are numbered
    /// `sequence - kept + 1 ... sequence`. Dropped ones are removed in bulk.
    private var storage: [Change] = []
    private var start = 0

    /// Makes an empty log that keeps the last `capacity` changes.
    init(capacity: Int = Self.defaultCapacity) {
        self.capacity = max(0, capacity)
    }

    /// How many changes are kept now.
    var kept: Int { storage.count - start }

    /// The smallest number a client may resume after: older ones have been dropped.
    var oldestResumable: Int { sequence - kept }

    /// Whether ``changes(after:limit:)`` can answer for `since`: it is neither
    /// older than what is kept nor newer than the latest change.
    func canResume(after since: Int) -> Bool {
        (oldestResumable...sequence).contains(since)
    }

    /// Records a change and returns its number.
    @discardableResult
    mutating func record(_ change: Change) -> Int {
        sequence += 1
        storage.append(change)
        trim()
        return sequence
    }

    /// Keeps the last `capacity` changes from now on, dropping older ones at once.
    mutating func resize(to capacity: Int) {
        self.capacity = max(0, capacity)
        trim()
    }

    /// The changes after `since`, at most `limit` of them; `nil` when `since`
    /// cannot be resumed from (see ``canResume(after:)``).
    func changes(after since: Int, limit: Int) -> Page? {
        guard canResume(after: since) else { return nil }
        let first = start + (since - oldestResumable)
        let end = min(storage.count, first + max(0, limit))
        let entries = (first..<end).map { index in
            Entry(seq: oldestResumable + 1 + (index - start), change: storage[index])
        }
        let cursor = entries.last?.seq ?? since
        return Page(changes: entries, cursor: cursor, more: cursor < sequence)
    }

    private mutating func trim() {
        if kept > capacity { start += kept - capacity }
        // Compact once the dropped prefix is as large as what is kept: amortised O(1).
        if start > 0, start >= max(capacity, 64) || start == storage.count {
            storage.removeFirst(start)
            start = 0
        }
    }
}
