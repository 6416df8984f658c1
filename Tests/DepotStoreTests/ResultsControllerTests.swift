import Depot
import Dispatch
import DepotTesting
import Foundation
import GRDB
import Observation
import Synchronization
import Testing
@testable import DepotStore

@Suite(.timeLimit(.minutes(1)))
@MainActor
struct ResultsControllerTests {
    /// Collects updates until the snapshot satisfies `done`, checking that each
    /// change set replays onto the previous snapshot exactly.
    func collect(
        _ results: ResultsController<Item>,
        until done: (ResultsSnapshot<Item>) -> Bool,
        during work: @escaping @Sendable () async throws -> Void
    ) async throws -> [ResultsUpdate<Item>] {
        var updates: [ResultsUpdate<Item>] = []
        let stream = results.updates()
        let writer = Task { try await work() }
        for await update in stream {
            if let changes = update.changes, let previous = updates.last {
                #expect(replay(changes, on: previous.snapshot, toward: update.snapshot) == update.snapshot)
            }
            updates.append(update)
            if done(update.snapshot) { break }
        }
        try await writer.value
        return updates
    }

    @Test func firstSnapshotIsThereAtOnceAndSectioned() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(9) { try item.insert(db) } }

        let results = try ResultsController(store: store, request: Item.bySection, sectionedBy: { $0.section })

        #expect(results.sections.map(\.name) == ["s0", "s1", "s2"])
        #expect(results.sections.map(\.items.count) == [3, 3, 3])
        #expect(results.fetchedObjects.count == 9)
        #expect(results.lastChanges == nil)
    }

    // Delivery on the main actor is checked by the compiler: `start` takes a
    // `@MainActor` closure and `updates()` is iterated here, in a `@MainActor` suite.
    @Test func eachKindOfChange() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(6) { try item.insert(db) } }
        let results = try ResultsController(store: store, request: Item.bySection, sectionedBy: { $0.section })
        // Insert into s1, delete from s0, update in place in s2, move within s1.
        let updates = try await collect(results, until: { $0.fetchedObjects.contains { $0.id == 100 } && $0.fetchedObjects.contains { $0.title == "edited" } }) {
            try await store.write { db in
                try Item(id: 100, section: "s1", rank: 0, title: "new").insert(db)
                _ = try Item.deleteOne(db, key: 0)
                try Item(id: 2, section: "s2", rank: 2, title: "edited").update(db)
                try Item(id: 4, section: "s1", rank: -1, title: "item 4").update(db)
            }
        }
        let changes = try #require(updates.last?.changes)
        #expect(changes.inserted.count == 1)
        #expect(changes.deleted == [ItemPath(section: 0, item: 0)])
        #expect(changes.updated == [ItemPath(section: 2, item: 0)])
        #expect(changes.moved.count == 1)
    }

    @Test func sectionsAppearDisappearAndMove() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(6) { try item.insert(db) } }
        // Sections ordered by the best rank in them: changing ranks reorders sections.
        let request = Item.order(Column("rank"))
        let results = try ResultsController(store: store, request: request, sectionedBy: { $0.section })
        #expect(results.sections.map(\.name) == ["s0", "s1", "s2"])

        let updates = try await collect(results, until: { $0.sections.map(\.name) == ["s2", "s0", "zz"] }) {
            try await store.write { db in
                // s2 jumps to the front, s1 disappears, zz appears.
                try db.execute(sql: "UPDATE item SET rank = rank - 100 WHERE section = 's2'")
                try db.execute(sql: "DELETE FROM item WHERE section = 's1'")
                try Item(id: 50, section: "zz", rank: 50, title: "z").insert(db)
            }
        }
        let changes = try #require(updates.last?.changes)
        #expect(changes.deletedSections.contains(1))
        #expect(changes.insertedSections.contains(2))
        #expect(!changes.insertedSections.isEmpty && !changes.deletedSections.isEmpty)
    }

    /// Every change set a results controller delivers, with the snapshot it led to.
    @MainActor
    final class Steps {
        let first: ResultsSnapshot<Item>
        var all: [(changes: ResultsChangeSet, snapshot: ResultsSnapshot<Item>)] = []
        var observation: ResultsObservation?

        init(_ results: ResultsController<Item>) {
            first = results.snapshot
            observation = results.start { [weak self] update in
                if let changes = update.changes { self?.all.append((changes, update.snapshot)) }
            }
        }

        /// Replays every change set, in order, on the first snapshot: the result,
        /// and how many change sets led exactly to the snapshot delivered with them.
        func replayed() -> (snapshot: ResultsSnapshot<Item>, exact: Int) {
            var replayed = first
            var exact = 0
            for step in all {
                // A change set that does not fit stops the replay, as it would stop a table view.
                guard let next = replay(step.changes, on: replayed, toward: step.snapshot) else { break }
                replayed = next
                if replayed == step.snapshot { exact += 1 }
            }
            return (replayed, exact)
        }
    }

    /// 200 items in sections, watched, with every delivery recorded.
    func observedItems() async throws -> (store: Store, results: ResultsController<Item>, steps: Steps) {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(200) { try item.insert(db) } }
        let results = try ResultsController(store: store, request: Item.bySection, sectionedBy: { $0.section })
        return (store, results, Steps(results))
    }

    func currentSnapshot(_ store: Store) async throws -> ResultsSnapshot<Item> {
        ResultsSnapshot(rows: try await store.read { db in try Item.bySection.fetchAll(db) }, sectionKey: { $0.section })
    }

    @Test func burstOfAThousandBlockingWritesIsCoalescedAndReplaysExactly() async throws {
        let (store, results, steps) = try await observedItems()
        defer { steps.observation?.cancel() }

        // 1,000 commits while the main actor is busy: deliveries cannot keep up, so they coalesce.
        try Self.blockingEdits(1000, store: store, seed: 7)
        let final = try await currentSnapshot(store)
        for await update in results.updates() where update.snapshot == final { break }

        #expect(!steps.all.isEmpty)
        #expect(steps.all.count < 50, "1,000 commits made \(steps.all.count) deliveries")
        // Replaying every change set, in order, on the first snapshot reproduces the last one.
        let replayed = steps.replayed()
        #expect(replayed.exact == steps.all.count)
        #expect(replayed.snapshot == final)
    }

    @Test func interleavedConcurrentBurstReplaysExactly() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(100) { try item.insert(db) } }
        let results = try ResultsController(store: store, request: Item.bySection, sectionedBy: { $0.section })

        // Four writers, 250 commits each, inserting, updating, moving and deleting.
        let stream = results.updates()
        let writers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        var random = SeededGenerator(seed: UInt64(writer))
                        for step in 0..<250 {
                            let seed = random.next()
                            try await store.write { db in
                                var random = SeededGenerator(seed: seed)
                                try Self.randomEdit(writer * 1000 + step, db: db, random: &random)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await writers.value
        let expected = ResultsSnapshot(rows: try await store.read { db in try Item.bySection.fetchAll(db) }, sectionKey: { $0.section })

        // Replay the change sets as they come, each on the result of the previous replay.
        var replayed: ResultsSnapshot<Item>?
        var deliveries = 0
        for await update in stream {
            if let current = replayed, let changes = update.changes {
                deliveries += 1
                guard let next = replay(changes, on: current, toward: update.snapshot) else {
                    Issue.record("change set \(deliveries) did not fit the snapshot before it")
                    break
                }
                replayed = next
            } else {
                replayed = update.snapshot
            }
            if update.snapshot == expected { break }
        }
        #expect(replayed == expected)
        #expect(deliveries >= 1 && deliveries <= 1000)
    }

    @Test func performFetchShowsACommitAtOnceAndObservationGoesOn() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let results = try ResultsController(store: store, request: Item.bySection)
        try await store.write { db in try Item(id: 1, section: "a", rank: 1, title: "one").insert(db) }
        // Without waiting for the observation, the row is there after performFetch.
        try results.performFetch()
        #expect(results.fetchedObjects.map(\.title) == ["one"])
        #expect(results.lastChanges?.insertedSections == [0])   // the new section covers its row
        // And later commits still arrive, as changes from that snapshot.
        try await store.write { db in try Item(id: 2, section: "a", rank: 2, title: "two").insert(db) }
        for await update in results.updates() where update.snapshot.count == 2 { break }
        #expect(results.lastChanges?.inserted == [ItemPath(section: 0, item: 1)])
    }

    /// A change the observation computed before `performFetch` replaced it must
    /// not be delivered after it: it was computed against an older snapshot.
    @Test func performFetchDropsAChangeComputedBeforeIt() async throws {
        let (store, results, steps) = try await observedItems()
        defer { steps.observation?.cancel() }

        // Commits while the main actor is busy: the observation computes a change
        // and waits for the main actor to deliver it. Then performFetch, still busy.
        for round in 0..<5 {
            try Self.blockingEdits(100, store: store, seed: UInt64(round))
            try results.performFetch()
        }
        let final = try await currentSnapshot(store)
        #expect(results.snapshot.fetchedObjects == final.fetchedObjects)
        // Let every change still on its way be delivered, then check nothing went back.
        await store.settled()
        let stillFinal = results.snapshot == final
        #expect(stillFinal, "a change computed before performFetch took the snapshot back")
        let replayed = steps.replayed()
        #expect(replayed.exact == steps.all.count, "\(steps.all.count - replayed.exact) change sets did not apply to the snapshot before them")
        let replaysToFinal = replayed.snapshot == final
        #expect(replaysToFinal)
    }

    @Test func startGivesTheCurrentSnapshotAtOnceAndStopsWhenCancelled() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(3) { try item.insert(db) } }
        let results = try ResultsController(store: store, request: Item.bySection)
        var received: [ResultsUpdate<Item>] = []
        let observation = results.start { received.append($0) }
        #expect(received.count == 1)
        #expect(received.first?.changes == nil)
        #expect(received.first?.snapshot.count == 3)

        observation.cancel()
        try await store.write { db in try Item(id: 77, section: "s0", rank: 77, title: "late").insert(db) }
        await store.settled()
        #expect(results.fetchedObjects.count == 4)
        #expect(received.count == 1)
    }

    /// Cancelling on the main actor is synchronous: an observation cancelled
    /// by another's callback, in the middle of a delivery, hears nothing more,
    /// not even that delivery.
    @Test func anObservationCancelledOnTheMainActorHearsNothingMore() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let results = try ResultsController(store: store, request: Item.bySection)
        var heardBySecond: [Int] = []
        var second: ResultsObservation?
        // The first observer cancels the second when the first change arrives.
        let first = results.start { update in
            if update.changes != nil { second?.cancel() }
        }
        second = results.start { update in heardBySecond.append(update.snapshot.count) }
        try await store.write { db in try Item(id: 1, section: "a", rank: 1, title: "one").insert(db) }
        await store.settled()
        #expect(results.fetchedObjects.count == 1)
        // Dictionary order decides who goes first; either way the cancelled one
        // hears at most that change, and nothing after the cancel returned.
        let heardAtCancel = heardBySecond
        try await store.write { db in try Item(id: 2, section: "a", rank: 2, title: "two").insert(db) }
        await store.settled()
        #expect(results.fetchedObjects.count == 2)
        #expect(heardBySecond == heardAtCancel)
        #expect(heardAtCancel.count <= 2)
        first.cancel()
    }

    /// A released observation stops at once too.
    @Test func aReleasedObservationHearsNothingMore() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let results = try ResultsController(store: store, request: Item.bySection)
        var heard = 0
        var observation: ResultsObservation? = results.start { _ in heard += 1 }
        #expect(heard == 1)
        observation = nil
        try await store.write { db in try Item(id: 1, section: "a", rank: 1, title: "one").insert(db) }
        await store.settled()
        #expect(results.fetchedObjects.count == 1)
        #expect(heard == 1)
        _ = observation
    }

    /// What a commit (a caching operation's, when `perform` returns) promises: the rows are in the store at once,
    /// and on screen once the store has settled.
    @Test func afterACommitTheRowsAreStoredAndAfterSettledTheyAreShown() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let results = try ResultsController(store: store, request: Item.bySection)
        try await store.write { db in try Item(id: 1, section: "a", rank: 1, title: "one").insert(db) }
        #expect(try await store.read { db in try Item.fetchCount(db) } == 1)
        await store.settled()
        #expect(results.fetchedObjects.map(\.title) == ["one"])
    }

    @Test func observableTrackingFiresOnChange() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let results = try ResultsController(store: store, request: Item.bySection)
        let fired = Counter()
        withObservationTracking {
            _ = results.fetchedObjects
        } onChange: {
            fired.increment()
        }
        try await store.write { db in try Item(id: 1, section: "a", rank: 1, title: "one").insert(db) }
        for await update in results.updates() where update.snapshot.count == 1 { break }
        #expect(fired.value == 1)
        #expect(results.fetchedObjects.map(\.title) == ["one"])
    }

    /// An item whose title is an object, so that a test can tell when no
    /// snapshot holds a row any more.
    struct TrackedItem: FetchableRecord, Identifiable, Equatable, Sendable {
        final class Title: Sendable {
            let text: String
            init(_ text: String) { self.text = text }
        }

        var id: Int
        var title: Title

        init(row: Row) {
            id = row["id"]
            title = Title(row["title"])
        }

        static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id && lhs.title.text == rhs.title.text }
    }

    /// Once a change is delivered, the rows it replaced are freed: the
    /// observation must not keep the snapshot it started from (1,000 results
    /// controllers that each kept their first rows grew the soak's heap by
    /// megabytes, one snapshot per controller, as each saw its first change).
    @Test func aDeliveredChangeFreesTheRowsItReplaced() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(3) { try item.insert(db) } }
        let results = try ResultsController(store: store, request: SQLRequest<TrackedItem>(sql: "SELECT id, title FROM item ORDER BY id"))
        weak let firstTitle = results.fetchedObjects.first?.title
        #expect(firstTitle != nil)

        try await store.write { db in try db.execute(sql: "UPDATE item SET title = title || ' edited'") }
        for await update in results.updates() where update.snapshot.fetchedObjects.allSatisfy({ $0.title.text.hasSuffix(" edited") }) { break }

        #expect(results.lastChanges?.updated.count == 3)
        #expect(firstTitle == nil, "the first snapshot is still held")
    }

    /// A results controller fetches its first rows and then starts observing:
    /// a commit that lands in between must still arrive as a change. The hook
    /// commits inside the first fetch, after its rows are read (its read
    /// transaction still open, so they cannot include the commit), before any
    /// observer is installed. Dropping the first round that watching a
    /// controller starts (`CommitFanout.watch`) makes this test hang until its
    /// time limit.
    @Test(arguments: [false, true])
    func aCommitBetweenTheFirstFetchAndTheObservationIsNotMissed(viaPerformFetch: Bool) async throws {
        // Given a store on a file (a pool: the first fetch runs on a reader, the observer on the writer)
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "window.sqlite").path, migrator: Item.migrator)
        try await store.write { db in for item in makeItems(3) { try item.insert(db) } }

        // When a commit lands right after the first fetch
        let fetches = Counter()
        let query = ResultsQuery<Item>(fetch: { db in
            let rows = try Item.bySection.fetchAll(db)
            fetches.increment()
            if fetches.value == 1 {
                try store.writer.write { db in try Item(id: 99, section: "s0", rank: 99, title: "in the window").insert(db) }
            }
            return rows
        }, region: { db in try Item.bySection.databaseRegion(db) })
        let results = try ResultsController<Item>(store: store, query: query, refresh: ResultsDiff.refresh(sectionKey: nil), held: viaPerformFetch)
        if viaPerformFetch { try results.performFetch() }
        #expect(results.fetchedObjects.count == 3, "the first rows were read before the commit")

        // Then it arrives, with nothing else committed after it
        for await update in results.updates() where update.snapshot.fetchedObjects.contains(where: { $0.id == 99 }) { break }
        #expect(results.fetchedObjects.count == 4)
        #expect(results.lastChanges?.inserted.count == 1)
    }

    /// A results controller whose every fetch `fetches` counts, and which
    /// throws once `broken` is set.
    func counted(_ request: QueryInterfaceRequest<Item>, on store: Store, fetches: Counter, broken: Counter? = nil) throws -> ResultsController<Item> {
        let query = ResultsQuery<Item>(fetch: { db in
            fetches.increment()
            if let broken, broken.value > 0 { throw DatabaseError(message: "broken on purpose") }
            return try request.fetchAll(db)
        }, region: { db in try request.databaseRegion(db) })
        return try ResultsController(store: store, query: query, refresh: ResultsDiff.refresh(sectionKey: nil), held: false)
    }

    /// A commit refetches only the results that read what it changed: a row
    /// they do not show, or another table, leaves them alone.
    @Test func aCommitRefetchesOnlyTheResultsWhoseRowsItChanged() async throws {
        // Given results of row 0, of row 1, and of the whole table
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in
            for item in makeItems(3) { try item.insert(db) }
            try db.create(table: "other") { t in t.primaryKey("id", .integer) }
        }
        let rowZeroFetches = Counter()
        let rowZero = try counted(Item.filter(key: 0), on: store, fetches: rowZeroFetches)
        let rowOne = try counted(Item.filter(key: 1), on: store, fetches: Counter())
        let all = try counted(Item.bySection, on: store, fetches: Counter())
        await store.fanout.settled()
        #expect(rowZeroFetches.value == 2, "made, then the first round, which finds what it reads")
        // A new client counts as changed by the transaction open when it was
        // made, if any: the next commit refreshes it once more, whatever it wrote.
        try await store.write { db in try db.execute(sql: "INSERT INTO other VALUES (0)") }
        await store.fanout.settled()
        #expect(rowZeroFetches.value == 3)

        // When row 1, another table, and then row 2 change
        try await store.write { db in try db.execute(sql: "UPDATE item SET title = 'one' WHERE id = 1") }
        try await store.write { db in try db.execute(sql: "INSERT INTO other VALUES (1)") }
        try await store.write { db in try db.execute(sql: "UPDATE item SET title = 'two' WHERE id = 2") }
        await store.fanout.settled()

        // Then row 0's results were not fetched again; the others were
        #expect(rowZeroFetches.value == 3)
        #expect(rowZero.fetchedObjects.map(\.title) == ["item 0"])
        #expect(rowOne.fetchedObjects.map(\.title) == ["one"])
        #expect(all.fetchedObjects.map(\.title) == ["item 0", "one", "two"])
        #expect(store.fanout.count == 3)
    }

    /// Holds the next fetch on a reader thread once armed, until opened (or
    /// 40 s: in a full parallel run on two loaded cores, the main actor that
    /// delivers the other list's change can be seconds behind).
    final class ReadGate: Sendable {
        private let armed = Mutex(false)
        private let waitedInVain = Mutex(false)
        private let semaphore = DispatchSemaphore(value: 0)
        func arm() { armed.withLock { $0 = true } }
        func open() { semaphore.signal() }
        func pass() {
            guard armed.withLock({ armed in defer { armed = false }; return armed }) else { return }
            let opened = semaphore.wait(timeout: .now() + 40) == .success
            if !opened { waitedInVain.withLock { $0 = true } }
        }
        /// Whether a held fetch gave up waiting: nothing opened the gate for 40 s.
        var timedOut: Bool { waitedInVain.withLock { $0 } }
    }

    /// A big list starts in the heavy lane, by the rows its own first fetch
    /// read: its first round does not hold up the others either (it ran in
    /// the light lane, and a small list's change waited for it).
    @Test func aBigListsFirstRoundDoesNotHoldUpTheOthers() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: Item.migrator)
        try await store.write { db in for item in makeItems(CommitFanout.heavyRows + 1) { try item.insert(db) } }
        let small = try ResultsController(store: store, request: Item.filter(key: 0))
        await store.fanout.settled()

        // The big list's own fetch passes; its first round's fetch (the second) is held
        let gate = ReadGate()
        let fetches = Counter()
        let request = Item.order(Column("id"))
        let big = try ResultsController(store: store, query: ResultsQuery<Item>(fetch: { db in
            fetches.increment()
            if fetches.value == 2 { gate.arm() }
            gate.pass()
            return try request.fetchAll(db)
        }, region: { db in try request.databaseRegion(db) }), refresh: ResultsDiff.refresh(sectionKey: nil), held: false)

        try await store.write { db in try db.execute(sql: "UPDATE item SET title = 'changed' WHERE id = 0") }
        for await update in small.updates() where update.snapshot.fetchedObjects.first?.title == "changed" { break }
        #expect(!gate.timedOut, "the small list's change waited for the big list's first round")
        gate.open()
        for await update in big.updates() where update.snapshot.fetchedObjects.first?.title == "changed" { break }
        await store.fanout.settled()
    }

    /// A list of a big table refreshes in a lane of its own: after a commit
    /// that changes both it and a small list, the small list gets its change
    /// while the big one is still being read (both used to wait for the big
    /// read, in one round).
    @Test func aHeavyListDoesNotHoldUpTheOthers() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // A file: reads run on several connections, so the lanes run side by side.
        let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: Item.migrator)
        try await store.write { db in for item in makeItems(CommitFanout.heavyRows + 1) { try item.insert(db) } }
        let gate = ReadGate()
        let request = Item.order(Column("id"))
        let big = try ResultsController(store: store, query: ResultsQuery<Item>(fetch: { db in
            gate.pass()
            return try request.fetchAll(db)
        }, region: { db in try request.databaseRegion(db) }), refresh: ResultsDiff.refresh(sectionKey: nil), held: false)
        let small = try ResultsController(store: store, request: Item.filter(key: 0))
        await store.fanout.settled()   // the big list's first round found it heavy

        gate.arm()
        try await store.write { db in try db.execute(sql: "UPDATE item SET title = 'changed' WHERE id = 0") }
        for await update in small.updates() where update.snapshot.fetchedObjects.first?.title == "changed" { break }
        #expect(big.fetchedObjects.first?.title == "item 0", "the big list's read is still held")
        gate.open()
        for await update in big.updates() where update.snapshot.fetchedObjects.first?.title == "changed" { break }
        #expect(big.fetchedObjects.count == CommitFanout.heavyRows + 1)
        await store.fanout.settled()
    }

    /// A fetch that fails stops its own results, with the error; the others
    /// refreshed by the same commit go on.
    @Test func aFailingFetchStopsOnlyItsOwnResults() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(3) { try item.insert(db) } }
        let broken = Counter()
        let brokenFetches = Counter()
        let failing = try counted(Item.bySection, on: store, fetches: brokenFetches, broken: broken)
        let healthy = try ResultsController(store: store, request: Item.bySection)

        broken.increment()
        try await store.write { db in try Item(id: 100, section: "s0", rank: 100, title: "new").insert(db) }
        for await update in healthy.updates() where update.snapshot.fetchedObjects.contains(where: { $0.id == 100 }) { break }
        #expect(failing.error?.code == .storage)
        #expect(failing.fetchedObjects.count == 3, "the last snapshot stays")
        let fetchesWhenFailed = brokenFetches.value

        try await store.write { db in try Item(id: 101, section: "s0", rank: 101, title: "newer").insert(db) }
        for await update in healthy.updates() where update.snapshot.fetchedObjects.contains(where: { $0.id == 101 }) { break }
        #expect(brokenFetches.value == fetchesWhenFailed, "a failed observation is not fetched again")
        #expect(store.fanout.count == 1)
    }

    /// Released results leave the store's fan-out.
    @Test func releasedResultsAreNoLongerWatched() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        var results: ResultsController<Item>? = try ResultsController(store: store, request: Item.bySection)
        #expect(store.fanout.count == 1)
        _ = results
        results = nil
        #expect(store.fanout.count == 0)
    }

    /// The writer keeps the fan-out weakly: a store released with its
    /// results releases its database, and a file store would close its file.
    @Test func aReleasedStoreWithItsResultsReleasesItsDatabase() async throws {
        weak var writer: (any DatabaseWriter)?
        do {
            let store = try Store.inMemory(migrator: Item.migrator)
            writer = store.writer
            let results = try ResultsController(store: store, request: Item.bySection)
            try await store.write { db in try Item(id: 1, section: "s0", rank: 1, title: "one").insert(db) }
            await store.fanout.settled()
            #expect(results.fetchedObjects.count == 1)
        }
        #expect(writer == nil)
    }

    /// A controller made while a write transaction is open sees its commit:
    /// on a pool, its first fetch and first round read the snapshot before
    /// that transaction, and the transaction wrote before the controller was
    /// there to be marked.
    @Test func aControllerMadeDuringAnOpenTransactionSeesItsCommit() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "mid.sqlite").path, migrator: Item.migrator)
        try await store.write { db in for item in makeItems(3) { try item.insert(db) } }

        let (inserted, insertedContinuation) = AsyncStream<Void>.makeStream()
        let proceed = DispatchSemaphore(value: 0)
        let write = Task.detached {
            try await store.write { db in
                try Item(id: 99, section: "s0", rank: 99, title: "mid").insert(db)
                insertedContinuation.yield(())
                proceed.wait()
            }
        }
        for await _ in inserted { break }

        // The transaction is open, its insert not committed.
        let results = try ResultsController(store: store, request: Item.bySection)
        #expect(results.fetchedObjects.count == 3)
        await store.fanout.settled()

        proceed.signal()
        try await write.value
        await store.fanout.settled()
        #expect(results.fetchedObjects.count == 4, "the commit after the controller was made is lost")
    }

    /// `Database.notifyChanges(in:)`, GRDB's way to tell observers of a
    /// change they could not see (another connection, another process),
    /// refreshes the results.
    @Test func notifyChangesRefreshesTheResults() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "notify.sqlite").path
        let store = try Store(path: path, migrator: Item.migrator)
        try await store.write { db in for item in makeItems(3) { try item.insert(db) } }
        let results = try ResultsController(store: store, request: Item.bySection)
        await store.fanout.settled()

        // Another connection (as another process would) writes.
        let other = try DatabaseQueue(path: path)
        try await other.write { db in try Item(id: 99, section: "s0", rank: 99, title: "elsewhere").insert(db) }
        try other.close()
        // The app tells the store's observers, as GRDB documents.
        try await store.write { db in try db.notifyChanges(in: Item.all()) }
        await store.fanout.settled()
        #expect(results.fetchedObjects.count == 4)
    }

    /// A `DELETE FROM item` compiled while the fan-out did not watch `item`
    /// (its readers were already changed in that transaction), then run from
    /// the statement cache in a later one, is still seen: GRDB decides per
    /// execution, not per compilation, whether SQLite may truncate.
    @Test func aCachedDeleteAllCompiledWhileTheTableWasNotWatchedIsSeen() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await store.write { db in for item in makeItems(3) { try item.insert(db) } }
        let results = try ResultsController(store: store, request: Item.bySection)
        await store.fanout.settled()

        try await store.write { db in
            try Item(id: 99, section: "s0", rank: 99, title: "x").insert(db)
            _ = try db.cachedStatement(sql: "DELETE FROM item")  // compiled now, not run
        }
        await store.fanout.settled()
        #expect(results.fetchedObjects.count == 4)

        try await store.write { db in try db.cachedStatement(sql: "DELETE FROM item").execute() }
        await store.fanout.settled()
        #expect(try await store.read { db in try Item.fetchCount(db) } == 0)
        #expect(results.fetchedObjects.count == 0, "the delete is lost")
    }

    /// Commits `count` random edits one by one without giving up the calling
    /// thread (the main actor here), so no delivery can run in between.
    static func blockingEdits(_ count: Int, store: Store, seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        for step in 0..<count {
            try store.writer.write { db in try randomEdit(step, db: db, random: &random) }
        }
    }

    /// One random edit: insert, update (content or section), or delete.
    nonisolated static func randomEdit(_ step: Int, db: Database, random: inout SeededGenerator) throws {
        let id = Int.random(in: 0..<300, using: &random)
        switch Int.random(in: 0..<4, using: &random) {
        case 0:
            try Item(id: id, section: "s\(Int.random(in: 0..<5, using: &random))", rank: Int.random(in: 0..<1000, using: &random), title: "step \(step)").upsert(db)
        case 1:
            try db.execute(sql: "UPDATE item SET title = ? WHERE id = ?", arguments: ["edit \(step)", id])
        case 2:
            try db.execute(sql: "UPDATE item SET rank = ? WHERE id = ?", arguments: [Int.random(in: 0..<1000, using: &random), id])
        default:
            _ = try Item.deleteOne(db, key: id)
        }
    }
}
