@testable import DemoServer
import Testing

/// The numbering and the kept window of ``ChangeLog``, without I/O.
@Suite struct ChangeLogTests {
    @Test func changesAreNumberedFromOneAndPagedInOrder() throws {
        var log = ChangeLog<String>(capacity: 10)
        #expect(log.sequence == 0)
        #expect(["a", "b", "c", "d"].map { log.record($0) } == [1, 2, 3, 4])

        let first = try #require(log.changes(after: 0, limit: 3))
        #expect(first.changes.map(\.seq) == [1, 2, 3])
        #expect(first.changes.map(\.change) == ["a", "b", "c"])
        #expect(first.cursor == 3)
        #expect(first.more)
        let last = try #require(log.changes(after: first.cursor, limit: 3))
        #expect(last.changes.map(\.change) == ["d"])
        #expect(last.cursor == 4 && !last.more)
        let empty = try #require(log.changes(after: 4, limit: 3))
        #expect(empty.changes.isEmpty && empty.cursor == 4 && !empty.more)
    }

    @Test func onlyTheLastCapacityChangesCanBeResumedFrom() throws {
        var log = ChangeLog<Int>(capacity: 3)
        for value in 1...200 { log.record(value) }
        // Kept: 198, 199, 200. Resumable after 197 (everything kept follows) to 200.
        #expect(log.kept == 3)
        #expect(log.oldestResumable == 197)
        #expect(!log.canResume(after: 196))
        #expect(log.changes(after: 196, limit: 10) == nil)
        #expect(try #require(log.changes(after: 197, limit: 10)).changes.map(\.change) == [198, 199, 200])
        #expect(try #require(log.changes(after: 199, limit: 10)).changes.map(\.seq) == [200])
        #expect(!log.canResume(after: 201), "a number from the future cannot be resumed from")
    }

    @Test func resizingDropsTheOldestAtOnce() throws {
        var log = ChangeLog<Int>(capacity: 5)
        for value in 1...5 { log.record(value) }
        log.resize(to: 2)
        #expect(log.oldestResumable == 3)
        #expect(try #require(log.changes(after: 3, limit: 10)).changes.map(\.seq) == [4, 5])
        log.resize(to: 0)
        #expect(log.canResume(after: 5) && !log.canResume(after: 4))
        log.record(6)
        #expect(log.sequence == 6 && log.kept == 0)
        #expect(try #require(log.changes(after: 6, limit: 1)).changes.isEmpty)
    }
}
