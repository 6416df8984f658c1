import Depot
import GRDB
import Synchronization

/// The store's one transaction observer for what the view layer watches
/// (results controllers, sync statuses, paged lists' state): after a commit
/// it refetches, in one read, every client whose region the commit changed,
/// diffs off the main actor, and delivers to them all in one turn of the
/// main actor.
///
/// A `ValueObservation` per client would give each its own serial queue
/// and its own read per commit: a commit seen by a few hundred controllers
/// wakes a few hundred queues at once, and libdispatch on Linux answers a
/// burst of wakeups on busy cores with new threads that it keeps. Here a
/// commit costs one task, one read and one main-actor hop, whatever the
/// number of controllers.
///
/// Rounds run one at a time in each of two lanes. Commits that land during a
/// round mark their controllers for the lane's next one, which is the
/// coalescing: a controller sees the newest rows, not every commit. A client
/// whose last round read more than ``heavyRows`` rows goes to the heavy lane,
/// whose rounds run beside the light lane's (a file store reads with several
/// connections): a list of a 200,000-row table does not hold up every other
/// list's delivery. One client is in one round at a time, so it gets its
/// changes in order. The callbacks run on the writer's queue; the state is
/// behind a mutex because controllers come and go on the main actor and
/// rounds read it from their task.
final class CommitFanout: TransactionObserver, Sendable {
    /// The main actor's part of one controller's refresh.
    typealias Delivery = @MainActor @Sendable () -> Void
    /// The part after the read, off the database: the diff. `nil`: nothing to deliver.
    typealias Diff = @Sendable () -> Delivery?

    /// A live result, as the fan-out sees it.
    struct Client: Sendable {
        /// What the controller reads, found in its first round: a commit
        /// outside it does not wake the controller. Until then, every commit does.
        var region: @Sendable (Database) throws -> DatabaseRegion
        /// Fetches the rows inside the round's read, and returns the rest
        /// and how many rows it read.
        var read: @Sendable (Database) -> (diff: Diff, rows: Int)
        /// Stops the controller (it removes itself) when the round's read failed.
        var fail: @Sendable (DepotError) -> Delivery
    }

    /// A client whose last round read more rows than this refreshes in the heavy lane.
    static let heavyRows = 10_000

    /// The two lanes: each runs its rounds one at a time.
    enum Lane: Int, CaseIterable {
        case light, heavy
    }

    private struct LaneState {
        /// Changed by a commit, waiting for a round.
        var dirty: Set<UInt64> = []
        var running = false
    }

    private struct State {
        var clients: [UInt64: Client] = [:]
        /// What each client reads, once a round found it. It stays when a
        /// client is replaced: an id is one controller, with one query.
        var regions: [UInt64: DatabaseRegion] = [:]
        /// The clients that read each table, by the name SQLite reports;
        /// filled as tables change and kept up to date as clients come and go.
        var readers: [String: Set<UInt64>] = [:]
        /// Changed by the current transaction.
        var changed: Set<UInt64> = []
        var lanes = [LaneState](repeating: LaneState(), count: Lane.allCases.count)
        /// The clients whose last round read more than ``CommitFanout/heavyRows`` rows.
        var heavy: Set<UInt64> = []
        /// The lane of each client in a round now: marks for it go there, so
        /// that it is never in two rounds at once.
        var inRound: [UInt64: Lane] = [:]
        var ids: UInt64 = 0
        /// Waiting in ``settled()``.
        var settling: [CheckedContinuation<Void, Never>] = []

        func reads(_ id: UInt64, _ table: String) -> Bool {
            regions[id]?.isModified(byEventsOfKind: .insert(tableName: table)) ?? true
        }

        mutating func readers(of table: String) -> Set<UInt64> {
            if let readers = readers[table] { return readers }
            let found = Set(clients.keys.filter { reads($0, table) })
            readers[table] = found
            return found
        }

        /// Puts `id` in, or takes it out of, each table's readers.
        mutating func updateReaders(of id: UInt64) {
            for (table, ids) in readers {
                if clients[id] != nil, reads(id, table) {
                    readers[table] = ids.union([id])
                } else if ids.contains(id) {
                    readers[table] = ids.subtracting([id])
                }
            }
        }

        /// Marks `ids` for a round, each in its lane.
        mutating func markDirty(_ ids: some Sequence<UInt64>) {
            for id in ids {
                let lane = inRound[id] ?? (heavy.contains(id) ? .heavy : .light)
                lanes[lane.rawValue].dirty.insert(id)
            }
        }

        /// Starts a round in each lane where none runs and something waits;
        /// returns those lanes.
        mutating func startRounds() -> [Lane] {
            Lane.allCases.filter { lane in
                guard !lanes[lane.rawValue].running, !lanes[lane.rawValue].dirty.isEmpty else { return false }
                lanes[lane.rawValue].running = true
                return true
            }
        }

        /// The clients the lane's next round refreshes, or `nil` (and the
        /// lane's rounds end) when none wait. `done` are the clients of the
        /// lane's last round, with how many rows each read.
        mutating func takeDirty(_ lane: Lane, done: [(id: UInt64, rows: Int?)]) -> [(id: UInt64, client: Client, knowsRegion: Bool)]? {
            for (id, rows) in done {
                inRound[id] = nil
                guard let rows, clients[id] != nil else { continue }
                if rows > CommitFanout.heavyRows { heavy.insert(id) } else { heavy.remove(id) }
            }
            let batch = lanes[lane.rawValue].dirty.compactMap { id in clients[id].map { (id: id, client: $0, knowsRegion: regions[id] != nil) } }
            lanes[lane.rawValue].dirty.removeAll()
            guard !batch.isEmpty else {
                lanes[lane.rawValue].running = false
                return nil
            }
            for entry in batch { inRound[entry.id] = lane }
            return batch
        }

        var isIdle: Bool { lanes.allSatisfy { !$0.running && $0.dirty.isEmpty } }

        /// The waiters to resume now that the rounds ended, unless a commit started another.
        mutating func settled() -> [CheckedContinuation<Void, Never>] {
            guard isIdle else { return [] }
            defer { settling = [] }
            return settling
        }

        mutating func remove(_ id: UInt64) {
            guard clients.removeValue(forKey: id) != nil else { return }
            regions[id] = nil
            updateReaders(of: id)
            changed.remove(id)
            heavy.remove(id)
            for lane in lanes.indices { lanes[lane].dirty.remove(id) }
        }
    }

    private let writer: any DatabaseWriter
    private let state = Mutex(State())

    init(writer: any DatabaseWriter) {
        self.writer = writer
    }

    /// Starts (or restarts) delivering to `id`, with a first round at once:
    /// a commit may have landed since the client's last fetch. The client
    /// also counts as changed by the transaction that may be open now: it
    /// may have written before the client was there to be marked, and its
    /// commit comes after the first round's read. (Without one open, that
    /// mark costs one refetch with nothing to deliver, at the next commit.)
    ///
    /// - Parameter rows: How many rows the client's own fetch just read, if
    ///   it did: a client over ``heavyRows`` starts in the heavy lane, so that
    ///   its first round does not hold up the others either.
    func watch(_ id: UInt64, _ client: Client, rows: Int? = nil) {
        schedule(state.withLock { state in
            state.clients[id] = client
            if let rows {
                if rows > Self.heavyRows { state.heavy.insert(id) } else { state.heavy.remove(id) }
            }
            state.updateReaders(of: id)
            state.changed.insert(id)
            state.markDirty(CollectionOfOne(id))
            return state.startRounds()
        })
    }

    /// A new client id.
    func makeID() -> UInt64 {
        state.withLock { state in
            state.ids += 1
            return state.ids
        }
    }

    /// Watches one value, as a `ValueObservation` would: fetches it in a
    /// first round, then after each commit that changes `region`, and hands
    /// it to `apply` on the main actor. A fetch that fails delivers nothing:
    /// the store closed, and the last value stays.
    func watch<Value: Sendable>(
        _ id: UInt64,
        region: @escaping @Sendable (Database) throws -> DatabaseRegion,
        fetch: @escaping @Sendable (Database) throws -> Value,
        apply: @escaping @MainActor @Sendable (Value) -> Void
    ) {
        let read: @Sendable (Database) -> (diff: Diff, rows: Int) = { db in
            guard let value = try? fetch(db) else { return ({ nil }, 1) }
            return ({ { apply(value) } }, 1)
        }
        watch(id, Client(region: region, read: read, fail: { _ in {} }))
    }

    /// Stops delivering to `id`.
    func remove(_ id: UInt64) {
        state.withLock { state in state.remove(id) }
    }

    /// Returns once no round runs and no commit waits for one: handy in tests.
    func settled() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state in
                guard !state.isIdle else { return true }
                state.settling.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// How many controllers it delivers to: handy in tests.
    var count: Int {
        state.withLock { $0.clients.count }
    }

    // MARK: TransactionObserver

    /// GRDB asks before each statement runs. A statement on a table whose
    /// readers this transaction already changed is not watched: a sync that
    /// inserts a million rows one statement at a time costs one event, not a
    /// million.
    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool {
        state.withLock { state in
            !state.readers(of: eventKind.tableName).isSubset(of: state.changed)
        }
    }

    func databaseDidChange(with event: DatabaseEvent) {
        let everyone = state.withLock { state in
            for id in state.readers(of: event.tableName) where !state.changed.contains(id) {
                if state.regions[id]?.isModified(by: event) ?? true {
                    state.changed.insert(id)
                }
            }
            return state.changed.count == state.clients.count
        }
        if everyone { stopObservingDatabaseChangesUntilNextTransaction() }
    }

    /// `Database.notifyChanges(in:)`: a change no event described (another
    /// connection wrote). Which region it was is not said, so every client
    /// refreshes.
    func databaseDidChange() {
        state.withLock { state in state.changed.formUnion(state.clients.keys) }
        stopObservingDatabaseChangesUntilNextTransaction()
    }

    func databaseDidCommit(_ db: Database) {
        schedule(state.withLock { state in
            state.markDirty(state.changed)
            state.changed.removeAll()
            return state.startRounds()
        })
    }

    func databaseDidRollback(_ db: Database) {
        state.withLock { $0.changed.removeAll() }
    }

    // MARK: Rounds

    private func schedule(_ lanes: [Lane]) {
        for lane in lanes {
            Task.detached(priority: .userInitiated) { await self.run(lane) }
        }
    }

    private func run(_ lane: Lane) async {
        defer {
            for waiter in state.withLock({ $0.settled() }) { waiter.resume() }
        }
        var done: [(id: UInt64, rows: Int?)] = []
        while let batch = state.withLock({ $0.takeDirty(lane, done: done) }) {
            var deliveries: [Delivery] = []
            do {
                // One read for the whole batch: every controller in it sees the same commit.
                let reads = try await writer.read { db in
                    batch.map { entry in
                        let read = entry.client.read(db)
                        return (region: entry.knowsRegion ? nil : try? entry.client.region(db), diff: read.diff, rows: read.rows)
                    }
                }
                state.withLock { state in
                    for (entry, read) in zip(batch, reads) where state.clients[entry.id] != nil {
                        guard let region = read.region else { continue }
                        state.regions[entry.id] = region
                        state.updateReaders(of: entry.id)
                    }
                }
                done = zip(batch, reads).map { ($0.id, $1.rows) }
                deliveries = reads.compactMap { $0.diff() }
            } catch {
                let error = DepotError.storage(error, detail: "observation failed")
                done = batch.map { ($0.id, nil) }
                deliveries = batch.map { $0.client.fail(error) }
            }
            guard !deliveries.isEmpty else { continue }
            await MainActor.run {
                for delivery in deliveries { delivery() }
            }
        }
    }
}
