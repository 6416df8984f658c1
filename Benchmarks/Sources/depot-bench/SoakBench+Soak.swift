import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization

// MARK: - The main actor's side

extension SoakBench {
    /// What lives on the main actor, as in an app: the tickets it holds, the
    /// completions, and the results controllers.
    @MainActor
    final class Soak {
        let controller: NetworkController
        let store: Store
        let counters: Counters
        var random: SeededGenerator
        var serial = 0
        /// The tickets not yet completed, in an array for random picks.
        var live: [Ticket] = []
        var position: [Ticket.ID: Int] = [:]
        var observers: [(results: ResultsController<Item>, observation: ResultsObservation)] = []
        /// Results controllers let go of, to check that they go away.
        var released: [Released] = []

        struct Released {
            weak var results: ResultsController<Item>?
            var at: ContinuousClock.Instant
        }

        init(controller: NetworkController, store: Store, counters: Counters, seed: UInt64) {
            (self.controller, self.store, self.counters) = (controller, store, counters)
            random = SeededGenerator(seed: seed)
        }

        /// Keeps `queuedTarget` operations outstanding.
        func topUp() {
            while live.count < queuedTarget, !counters.isStopping { enqueueOne() }
        }

        /// 60% feeds, 10% feeds that coalesce, 5% urgent feeds that finish at
        /// shutdown, 5% revalidations (304s after each feed's first 200), 1% 503s, 19% images.
        func enqueueOne() {
            serial += 1
            let feed = Int.random(in: 0..<feedCount, using: &random)
            let ticket = switch Int.random(in: 0..<100, using: &random) {
            case 0..<60: enqueue(FetchFeed(feed: feed, serial: serial))
            case 60..<70: enqueue(FetchFeed(feed: feed, serial: 0))
            case 70..<75: enqueue(FetchFeed(feed: feed, serial: serial, priority: .high, exitPolicy: .finish))
            case 75..<80: enqueue(FetchFeed(feed: feed, serial: serial, revalidates: true))
            case 80..<81: enqueue(FetchFeed(feed: feed, serial: serial, route: "flaky"))
            default: enqueue(FetchImage(serial: serial))
            }
            counters.enqueued.add(1, ordering: .relaxed)
            position[ticket.id] = live.count
            live.append(ticket)
        }

        private func enqueue<Operation: NetworkOperation>(_ operation: Operation) -> Ticket {
            controller.enqueue(operation) { ticket, result in
                self.completed(ticket, result.map { _ in })
            }
        }

        func completed(_ ticket: Ticket, _ result: Result<Void, DepotError>) {
            guard let index = position.removeValue(forKey: ticket.id) else {
                counters.duplicates.add(1, ordering: .relaxed)
                return
            }
            let last = live.removeLast()
            if index < live.count {
                live[index] = last
                position[last.id] = index
            }
            switch result {
            case .success: counters.succeeded.add(1, ordering: .relaxed)
            case .failure(let error) where error.code == .cancelled: counters.cancelled.add(1, ordering: .relaxed)
            case .failure(let error):
                counters.failed.add(1, ordering: .relaxed)
                counters.noteFailure(error)
            }
            if !counters.isStopping { enqueueOne() }
        }

        func cancelSome() {
            for _ in 0..<cancelsPerTick where !live.isEmpty {
                live[Int.random(in: 0..<live.count, using: &random)].cancel()
                counters.cancelRequests.add(1, ordering: .relaxed)
            }
        }

        /// A results controller over one feed (sectioned), or one in ten over a
        /// table's 30 most liked rows.
        func makeObserver(_ number: Int) throws {
            let table = Table<Item>("item\(number % tableCount)")
            let results = if number % 10 == 0 {
                try ResultsController(store: store, request: table.select(Item.columns).order(Column("likes").desc, Column("id")).limit(30))
            } else {
                try ResultsController(
                    store: store,
                    // number % feedCount is a feed of table number % tableCount: feedCount is a multiple of it.
                    request: table.select(Item.columns).filter(Column("feed") == number % feedCount).order(Column("rank")),
                    sectionedBy: { $0.section })
            }
            let counters = counters
            let observation = results.start { _ in
                counters.observationErrors.add(1, ordering: .relaxed)
            } onChange: { update in
                if update.changes != nil { counters.changeSets.add(1, ordering: .relaxed) }
            }
            observers.append((results, observation))
        }

        /// Releases a random results controller and makes a new one in its place.
        func replaceObserver() throws {
            guard !observers.isEmpty else { return }
            let index = Int.random(in: 0..<observers.count, using: &random)
            observers[index].observation.cancel()
            released.append(Released(results: observers[index].results, at: .now))
            observers.swapAt(index, observers.count - 1)
            observers.removeLast()
            try makeObserver(Int.random(in: 0..<observerCount, using: &random))
            counters.replacedObservers.add(1, ordering: .relaxed)
        }

        /// Released results controllers still alive `age` after their release.
        func lingering(olderThan age: Duration) -> Int {
            released.removeAll { $0.results == nil }
            let now = ContinuousClock.now
            return released.count(where: { $0.at.duration(to: now) > age })
        }

        /// Releases every results controller; returns how many are still alive
        /// after waiting up to `patience` for them to go.
        func releaseAll(patience: Duration) async -> Int {
            for observer in observers {
                observer.observation.cancel()
                released.append(Released(results: observer.results, at: .now))
            }
            observers.removeAll()
            let deadline = ContinuousClock.now.advanced(by: patience)
            while lingering(olderThan: .zero) > 0, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(100)) }
            return lingering(olderThan: .zero)
        }
    }
}
