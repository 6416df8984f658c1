import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization

/// Everything at once, in real time, for a given duration: 10,000 operations
/// kept queued on a simulated link whose quality cycles every minute, 1,000
/// results controllers observing the tables those operations write, random
/// cancellations, and a writer committing beside them. Reports RSS and the
/// longest main-actor stall each minute, and fails on a deadlock, a lost or
/// doubled completion, or RSS that is not flat.
///
/// Real parts: a SQLite file in a temporary folder (`Store`), the real
/// `NetworkController`, and `NetworkSimulator` on `ContinuousClock`.
enum SoakBench {
    static let queuedTarget = 10_000
    /// `DEPOT_SOAK_OBSERVERS=n` changes it, to see what the observers cost.
    static let observerCount = ProcessInfo.processInfo.environment["DEPOT_SOAK_OBSERVERS"].flatMap { Int($0) } ?? 1_000
    static let tableCount = 8
    static let feedCount = 512
    static let entriesPerFeed = 22
    /// The stall timer's period: a frame.
    static let framePeriod = Duration.milliseconds(16)
    /// Seconds of an online link, with work queued and no completion, that count as a deadlock.
    static let watchdogSeconds = 30
    /// Random `Ticket.cancel()` calls per 100 ms.
    static let cancelsPerTick = 2

    // MARK: The data

    /// A row of one of the `item0` … `item7` tables.
    struct Item: FetchableRecord, Identifiable, Equatable, Sendable {
        var id: Int
        var feed: Int
        var rank: Int
        var section: String
        var title: String
        var likes: Int

        init(id: Int, feed: Int, rank: Int, title: String) {
            (self.id, self.feed, self.rank, self.section, self.title, self.likes) = (id, feed, rank, rank < 10 ? "top" : "more", title, 0)
        }

        init(row: GRDB.Row) {
            (id, feed, rank, section, title, likes) = (row[0], row[1], row[2], row[3], row[4], row[5])
        }

        static var columns: [any SQLSelectable] { ["id", "feed", "rank", "section", "title", "likes"].map { Column($0) } }
        static func table(of feed: Int) -> String { "item\(feed % tableCount)" }
    }

    /// One element of a feed's JSON body.
    struct Entry: Codable, Sendable {
        var rank: Int
        var title: String
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("soak") { db in
            for table in 0..<tableCount {
                try db.create(table: "item\(table)") { t in
                    t.primaryKey("id", .integer)
                    t.column("feed", .integer).notNull()
                    t.column("rank", .integer).notNull()
                    t.column("section", .text).notNull()
                    t.column("title", .text).notNull()
                    t.column("likes", .integer).notNull()
                }
                try db.create(index: "item\(table)_feed", on: "item\(table)", columns: ["feed", "rank"])
            }
        }
        return migrator
    }

    static let feedBody = try! JSONEncoder().encode((0..<entriesPerFeed).map { rank in
        Entry(rank: rank, title: "Entry \(rank): " + String(repeating: "lorem ipsum ", count: 8))
    })

    // MARK: The operations

    /// Fetches a feed and writes its entries into its table (a 200), or confirms
    /// it (`same/`: a 304), or meets a server that always answers 503 (`flaky/`).
    struct FetchFeed: CachingOperation {
        typealias Payload = [Item]
        typealias Written = Int
        var feed: Int
        /// Varies the titles written; 0 makes a request that coalesces with others for the feed.
        var serial: Int
        var route = "feed"
        var priority: Priority = .normal
        var exitPolicy: ExitPolicy = .cancel

        var request: NetworkRequest {
            serial == 0 ? .get("\(route)/\(feed)") : .get("\(route)/\(feed)", query: ["n": String(serial)])
        }
        var cacheKey: String { "feed-\(feed)" }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Item] {
            items(try JSONDecoder().decode([Entry].self, from: response.body))
        }

        /// 18 to 22 rows; about one title in seven differs from the plain one.
        func items(_ entries: [Entry]) -> [Item] {
            entries.prefix(18 + serial % 5).map { entry in
                let edited = serial != 0 && (entry.rank + serial) % 7 == 0
                return Item(id: feed * 32 + entry.rank, feed: feed, rank: entry.rank, title: edited ? "\(entry.title)#\(serial)" : entry.title)
            }
        }

        func write(_ items: [Item], to db: Database) throws -> Int {
            let table = Item.table(of: feed)
            let upsert = try db.cachedStatement(sql: """
                INSERT INTO \(table) (id, feed, rank, section, title, likes) VALUES (?, ?, ?, ?, ?, 0)
                ON CONFLICT(id) DO UPDATE SET title = excluded.title WHERE title != excluded.title
                """)
            for item in items { try upsert.execute(arguments: [item.id, item.feed, item.rank, item.section, item.title]) }
            try db.cachedStatement(sql: "DELETE FROM \(table) WHERE feed = ? AND rank >= ?").execute(arguments: [feed, items.count])
            return items.count
        }
    }

    /// A 48 KB image: low priority, paused and dropped when the link is poor.
    struct FetchImage: NetworkOperation {
        var serial: Int
        var request: NetworkRequest { .get("image/\(serial)") }
        var priority: Priority { .low }
        var category: OperationCategory { .images }
        var isDroppable: Bool { true }

        func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int { response.body.count }
    }

    // MARK: The link

    /// A `NetworkSimulator` on the real clock that cycles excellent (12 s) →
    /// good (13 s) → poor (25 s) → offline (10 s), replaced by a fresh one at
    /// each minute. A simulator keeps a record of every transfer for tests to
    /// read; over a soak that history would grow by about 200 bytes per transfer
    /// and show as RSS. Each one ends its minute offline, so none has a transfer
    /// open when it is replaced.
    final class Link: Transport {
        private let current: Mutex<NetworkSimulator>

        init() { current = Mutex(Self.makeSimulator()) }

        static func makeSimulator() -> NetworkSimulator {
            NetworkSimulator(
                clock: ContinuousClock(),
                link: .init(bandwidth: 8_000_000, rtt: .milliseconds(25)),
                routes: [
                    .init(path: "/feed/*", body: feedBody, latency: .milliseconds(5), headers: ["ETag": "\"v1\"", "Content-Type": "application/json"]),
                    .init(path: "/same/*", status: 304, bytes: 0, latency: .milliseconds(5), headers: ["ETag": "\"v1\""]),
                    .init(path: "/flaky/*", status: 503, bytes: 0),
                    .init(path: "/image/*", bytes: 48_000),
                ],
                timeline: [
                    .bandwidth(1_500_000, at: .seconds(12)), .rtt(.milliseconds(80), at: .seconds(12)),
                    .bandwidth(100_000, at: .seconds(25)), .rtt(.milliseconds(300), at: .seconds(25)),
                    .offline(at: .seconds(50)),
                ],
                // A TCP segment's payload: with 16 KB chunks a 3 KB body arrives whole,
                // and the controller's link meter counts its bytes but none of its time.
                chunkSize: 1_460)
        }

        var simulator: NetworkSimulator { current.withLock { $0 } }

        func send(_ request: TransportRequest) async throws -> TransportResponse {
            try await simulator.send(request)
        }

        /// Starts a new cycle; returns how many transfers the old simulator saw.
        func rotate() -> Int {
            let fresh = Self.makeSimulator()
            let old = current.withLock { simulator in
                defer { simulator = fresh }
                return simulator
            }
            return old.records.count
        }
    }
}

// MARK: - Counting

extension SoakBench {
    /// What every part of the run counts; read by the monitor off the main actor.
    final class Counters: Sendable {
        let enqueued = Atomic<Int>(0)
        let succeeded = Atomic<Int>(0)
        let cancelled = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        /// Completions for a ticket that had already completed, or was never enqueued.
        let duplicates = Atomic<Int>(0)
        let changeSets = Atomic<Int>(0)
        let observationErrors = Atomic<Int>(0)
        let replacedObservers = Atomic<Int>(0)
        /// The most released results controllers seen alive 10 s after their release.
        let lingeringControllers = Atomic<Int>(0)
        let cancelRequests = Atomic<Int>(0)
        let commits = Atomic<Int>(0)
        /// The writer's commits: their total time, and the longest since the monitor last read it, in ns.
        let commitTime = Atomic<Int>(0)
        let longestCommit = Atomic<Int>(0)
        let writerErrors = Atomic<Int>(0)
        /// The longest main-actor delay beyond the frame period since the monitor last read it, in ns.
        let longestStall = Atomic<Int>(0)
        /// When the main actor last ran the frame timer, in ns since the start.
        let heartbeat = Atomic<Int>(0)
        /// When the monitor task last ran (on the cooperative pool), in ns since the start.
        let monitorBeat = Atomic<Int>(0)
        let stopping = Atomic<Bool>(false)
        let finished = Atomic<Bool>(false)
        let failures = Mutex<[String: Int]>([:])
        let start = ContinuousClock.now

        var resolved: Int { succeeded.load(ordering: .relaxed) + cancelled.load(ordering: .relaxed) + failed.load(ordering: .relaxed) }
        var outstanding: Int { enqueued.load(ordering: .relaxed) - resolved }
        var isStopping: Bool { stopping.load(ordering: .relaxed) }

        func nanoseconds(at instant: ContinuousClock.Instant) -> Int { SoakBench.nanoseconds(start.duration(to: instant)) }

        func noteFailure(_ error: DepotError) {
            failures.withLock { $0["\(error.code)", default: 0] += 1 }
        }
    }

    /// Resident memory of this process, in MB (`VmRSS` in `/proc/self/status`).
    static func residentMegabytes() -> Double {
        statusField("VmRSS").map { $0 / 1024 } ?? 0
    }

    /// Threads of this process (`Threads` in `/proc/self/status`): libdispatch's
    /// workers included. Each thread keeps freed chunks in its own malloc cache
    /// (tcache), which malloc still counts as in use.
    static func threadCount() -> Int? {
        statusField("Threads").map { Int($0) }
    }

    /// The number after `name:` in `/proc/self/status`.
    static func statusField(_ name: String) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            return line.dropFirst(name.count + 1).split(whereSeparator: \.isWhitespace).first.flatMap { Double($0) }
        }
        return nil
    }

    /// Bytes glibc's malloc has handed out and not had back, in MB: with
    /// resident memory beside it, this tells a leak from memory the allocator
    /// keeps after it was freed. Read from `malloc_stats()`, which prints to
    /// stderr, so stderr goes to a file for the call; `nil` off glibc.
    static func heapInUseMegabytes() -> Double? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_stats") else { return nil }
        let path = FileManager.default.temporaryDirectory.appending(path: "depot-soak-malloc-\(getpid()).txt").path
        let file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard file >= 0 else { return nil }
        let saved = dup(2)
        dup2(file, 2)
        close(file)
        unsafeBitCast(symbol, to: (@convention(c) () -> Void).self)()
        dup2(saved, 2)
        close(saved)
        defer { try? FileManager.default.removeItem(atPath: path) }
        // The last "in use bytes" line is the total, mmapped chunks included.
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let line = text.split(separator: "\n").last(where: { $0.contains("in use bytes") }),
              let bytes = line.split(separator: "=").last.flatMap({ Double($0.trimmingCharacters(in: .whitespaces)) }) else { return nil }
        return bytes / 1_048_576
    }

    /// What SQLite has allocated (`sqlite3_memory_used()`: page caches, statements), in MB.
    static func sqliteMegabytes() -> Double? {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "sqlite3_memory_used") else { return nil }
        return Double(unsafeBitCast(symbol, to: (@convention(c) () -> Int64).self)()) / 1_048_576
    }

    /// `10m`, `90s`, `1h` or plain seconds.
    static func parseDuration(_ text: String) -> Duration? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600]
        if let unit = text.last, let factor = units[unit], let value = Int64(text.dropLast()) { return .seconds(value * factor) }
        return Int64(text).map { .seconds($0) }
    }
}

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
        /// shutdown, 5% 304s, 1% 503s, 19% images.
        func enqueueOne() {
            serial += 1
            let feed = Int.random(in: 0..<feedCount, using: &random)
            let ticket = switch Int.random(in: 0..<100, using: &random) {
            case 0..<60: enqueue(FetchFeed(feed: feed, serial: serial))
            case 60..<70: enqueue(FetchFeed(feed: feed, serial: 0))
            case 70..<75: enqueue(FetchFeed(feed: feed, serial: serial, priority: .high, exitPolicy: .finish))
            case 75..<80: enqueue(FetchFeed(feed: feed, serial: serial, route: "same"))
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

// MARK: - The run

extension SoakBench {
    struct Minute {
        var rss: Double
        var heap: Double?
        var sqlite: Double?
        var threads: Int?
        var transfers: Int
        var succeeded = 0, cancelled = 0, failed = 0, changeSets = 0, commits = 0, commitTime = 0
        var stall: Duration
        var qualities: [ConnectionQuality]
    }

    /// Runs the soak; returns whether every check passed.
    @MainActor
    static func run(duration: Duration, seed: UInt64) async throws -> Bool {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-soak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "soak.sqlite").path, migrator: migrator)
        let entries = try JSONDecoder().decode([Entry].self, from: feedBody)
        try await store.write { db in
            for feed in 0..<feedCount {
                let operation = FetchFeed(feed: feed, serial: 0)
                _ = try operation.write(operation.items(entries), to: db)
            }
        }
        let link = Link()
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://sim.test")!, transport: link)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let counters = Counters()
        let soak = Soak(controller: controller, store: store, counters: counters, seed: seed)
        for number in 0..<observerCount { try soak.makeObserver(number) }
        say("soak: \(duration), seed \(seed): \(queuedTarget) operations kept queued, \(observerCount) results controllers over \(tableCount) tables, \(cancelsPerTick * 10) cancels/s, a writer committing 4 times/s")
        say("link: NetworkSimulator on ContinuousClock, each minute 8 Mbit/s 25 ms (12 s) → 1.5 Mbit/s 80 ms (13 s) → 100 kbit/s 300 ms (25 s) → offline (10 s)")
        say("| minute | RSS MB | heap in use MB | of which SQLite MB | transfers | completed | cancelled | failed | change sets | writer commits | commit mean / longest | longest stall | controller's quality |")
        say("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")

        // A frame timer on the main actor: how late each 16 ms tick comes is a stall.
        let frames = Task { @MainActor in
            let clock = ContinuousClock()
            var last = clock.now
            while !counters.finished.load(ordering: .relaxed) {
                try? await clock.sleep(for: framePeriod)
                let now = clock.now
                counters.longestStall.raise(to: counters.nanoseconds(at: now) - counters.nanoseconds(at: last) - nanoseconds(framePeriod))
                counters.heartbeat.store(counters.nanoseconds(at: now), ordering: .relaxed)
                last = now
            }
        }
        let chaos = Task { @MainActor in
            var tick = 0
            while !counters.isStopping {
                try? await Task.sleep(for: .milliseconds(100))
                guard !counters.isStopping else { break }
                soak.cancelSome()
                soak.topUp()
                tick += 1
                if tick % 10 == 0 {
                    do { try soak.replaceObserver() } catch { counters.observationErrors.add(1, ordering: .relaxed) }
                    counters.lingeringControllers.raise(to: soak.lingering(olderThan: .seconds(10)))
                }
            }
        }
        let writer = Task.detached {
            var random = SeededGenerator(seed: seed &+ 1)
            while !counters.isStopping {
                try? await Task.sleep(for: .milliseconds(250))
                let table = Int.random(in: 0..<tableCount, using: &random)
                let ids = (0..<3).map { _ in (table + tableCount * Int.random(in: 0..<(feedCount / tableCount), using: &random)) * 32 + Int.random(in: 0..<18, using: &random) }
                do {
                    let start = ContinuousClock.now
                    try await store.write { db in
                        for id in ids { try db.execute(sql: "UPDATE item\(table) SET likes = likes + 1 WHERE id = ?", arguments: [id]) }
                    }
                    let time = nanoseconds(start.duration(to: .now))
                    counters.commitTime.add(time, ordering: .relaxed)
                    counters.longestCommit.raise(to: time)
                    counters.commits.add(1, ordering: .relaxed)
                } catch {
                    counters.writerErrors.add(1, ordering: .relaxed)
                }
            }
        }

        _ = link.rotate()  // the link's cycle starts with the clock
        // A thread of its own, so that it also sees a cooperative pool that no longer runs anything.
        counters.heartbeat.store(counters.nanoseconds(at: .now), ordering: .relaxed)
        counters.monitorBeat.store(counters.nanoseconds(at: .now), ordering: .relaxed)
        Thread { watchdog(controller: controller, link: link, counters: counters) }.start()
        let watching = Task.detached { await watch(duration: duration, controller: controller, link: link, counters: counters) }
        soak.topUp()
        let minutes = await watching.value

        // Stop, shut down, and wait for the completions that shutdown resolved.
        counters.stopping.store(true, ordering: .relaxed)
        await chaos.value
        await writer.value
        let shutdownStart = ContinuousClock.now
        let report = await controller.shutdown(grace: .seconds(5))
        let shutdownTime = shutdownStart.duration(to: .now)
        let settleDeadline = ContinuousClock.now.advanced(by: .seconds(30))
        while counters.outstanding > 0, ContinuousClock.now < settleDeadline { try? await Task.sleep(for: .milliseconds(50)) }
        counters.finished.store(true, ordering: .relaxed)
        await frames.value
        let alive = await soak.releaseAll(patience: .seconds(10))

        return verdict(minutes: minutes, counters: counters, report: report, shutdownTime: shutdownTime, open: soak.live, aliveControllers: alive)
    }

    /// Each second: the controller's quality and the stalls; each minute: a
    /// row, and a fresh link cycle.
    static func watch(duration: Duration, controller: NetworkController, link: Link, counters: Counters) async -> [Minute] {
        let clock = ContinuousClock()
        let begin = clock.now
        let seconds = max(1, Int(duration.components.seconds))
        var minutes: [Minute] = []
        var last = Minute(rss: 0, transfers: 0, stall: .zero, qualities: [])
        var current = Minute(rss: 0, transfers: 0, stall: .zero, qualities: [controller.quality])
        for second in 1...seconds {
            try? await clock.sleep(until: begin.advanced(by: .seconds(second)))
            counters.monitorBeat.store(counters.nanoseconds(at: clock.now), ordering: .relaxed)
            let silent = counters.nanoseconds(at: clock.now) - counters.heartbeat.load(ordering: .relaxed)
            let stall = max(counters.longestStall.exchange(0, ordering: .relaxed), silent - nanoseconds(framePeriod))
            current.stall = max(current.stall, .nanoseconds(stall))
            let quality = controller.quality
            if quality != current.qualities.last { current.qualities.append(quality) }
            guard second % 60 == 0 || second == seconds else { continue }

            current.rss = residentMegabytes()
            current.heap = heapInUseMegabytes()
            current.sqlite = sqliteMegabytes()
            current.threads = threadCount()
            current.transfers = second % 60 == 0 ? link.rotate() : link.simulator.records.count
            current.succeeded = counters.succeeded.load(ordering: .relaxed)
            current.cancelled = counters.cancelled.load(ordering: .relaxed)
            current.failed = counters.failed.load(ordering: .relaxed)
            current.changeSets = counters.changeSets.load(ordering: .relaxed)
            current.commits = counters.commits.load(ordering: .relaxed)
            current.commitTime = counters.commitTime.load(ordering: .relaxed)
            let commits = max(1, current.commits - last.commits)
            let row = [
                String(format: "%.1f", Double(second) / 60), String(format: "%.1f", current.rss), current.heap.map { String(format: "%.1f", $0) } ?? "–",
                current.sqlite.map { String(format: "%.1f", $0) } ?? "–", "\(current.transfers)",
                "\(current.succeeded - last.succeeded)", "\(current.cancelled - last.cancelled)", "\(current.failed - last.failed)",
                "\(current.changeSets - last.changeSets)", "\(current.commits - last.commits)",
                String(format: "%.1f / %.1f ms", Double(current.commitTime - last.commitTime) / Double(commits) / 1e6, Double(counters.longestCommit.exchange(0, ordering: .relaxed)) / 1e6),
                String(format: "%.1f ms", Double(nanoseconds(current.stall)) / 1e6),
                current.qualities.map(\.description).joined(separator: " → "),
            ]
            say("| " + row.joined(separator: " | ") + " |")
            minutes.append(current)
            last = current
            current = Minute(rss: 0, transfers: 0, stall: .zero, qualities: [quality])
        }
        return minutes
    }
}

// MARK: - Verdict

extension SoakBench {
    static func verdict(minutes: [Minute], counters: Counters, report: ShutdownReport, shutdownTime: Duration, open: [Ticket], aliveControllers: Int) -> Bool {
        var passed = true
        let enqueued = counters.enqueued.load(ordering: .relaxed)
        let (succeeded, cancelled, failed) = (counters.succeeded.load(ordering: .relaxed), counters.cancelled.load(ordering: .relaxed), counters.failed.load(ordering: .relaxed))
        let failures = counters.failures.withLock { $0 }.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        say("")
        say("operations: \(enqueued) enqueued, \(succeeded) completed, \(cancelled) cancelled, \(failed) failed (\(failures)); \(counters.cancelRequests.load(ordering: .relaxed)) cancel() calls")
        say("results controllers: \(counters.changeSets.load(ordering: .relaxed)) change sets delivered, \(counters.replacedObservers.load(ordering: .relaxed)) controllers replaced, \(counters.observationErrors.load(ordering: .relaxed)) observation errors")
        say("writer: \(counters.commits.load(ordering: .relaxed)) commits, \(counters.writerErrors.load(ordering: .relaxed)) errors")
        say("shutdown: \(report), returned in \(shutdownTime)")
        let longest = minutes.map(\.stall).max() ?? .zero
        say("longest main-actor stall: \(longest) (beyond the \(framePeriod) frame)")
        say("threads at each minute's end: \(minutes.map { $0.threads.map(String.init) ?? "–" }.joined(separator: ", "))")

        let lost = enqueued - (succeeded + cancelled + failed)
        if lost == 0 {
            say("completions: every one accounted for: \(enqueued) enqueued = \(succeeded) completed + \(cancelled) cancelled + \(failed) failed; \(counters.duplicates.load(ordering: .relaxed)) twice")
        } else {
            say("LOST \(lost) completions: \(enqueued) enqueued, \(succeeded + cancelled + failed) completed; open: \(open.prefix(10).map { "\($0) finished=\($0.isFinished)" }.joined(separator: ", "))")
            passed = false
        }
        let lingering = counters.lingeringControllers.load(ordering: .relaxed)
        say("released results controllers: \(aliveControllers) still alive 10 s after the end; at most \(lingering) alive 10 s after their release during the run")
        if aliveControllers > 0 || lingering > 0 { passed = false }
        let duplicates = counters.duplicates.load(ordering: .relaxed)
        if duplicates > 0 {
            say("DUPLICATE completions: \(duplicates)")
            passed = false
        }
        if minutes.count >= 2 {
            let (second, last) = (minutes[1].rss, minutes[minutes.count - 1].rss)
            let change = (last - second) / second * 100
            let flat = abs(change) <= 10
            say(String(format: "RSS flat: last minute %.1f MB within %.1f%% of the second minute (%.1f MB; target ≤ 10%%): %@", last, abs(change), second, flat ? "PASS" : "FAIL"))
            passed = passed && flat
            if let secondHeap = minutes[1].heap, let lastHeap = minutes[minutes.count - 1].heap {
                say(String(format: "heap in use (malloc): last minute %.1f MB, %+.1f%% on the second minute (%.1f MB)", lastHeap, (lastHeap - secondHeap) / secondHeap * 100, secondHeap))
                if let secondSQLite = minutes[1].sqlite, let lastSQLite = minutes[minutes.count - 1].sqlite {
                    say(String(format: "of which SQLite: %.1f MB, then %.1f MB", secondSQLite, lastSQLite))
                }
            }
        } else {
            say("RSS flat: needs at least two minutes")
        }
        say("no deadlock (watchdog: \(watchdogSeconds) s)")
        say(passed ? "PASS" : "FAIL")
        return passed
    }

    /// Once a second until the run is finished: fails the run (exit 1) when the
    /// main actor, or the cooperative pool, has not run for `watchdogSeconds`;
    /// when nothing completed for `watchdogSeconds` of online link with work
    /// outstanding; or when shutdown and its completions take over 120 s.
    static func watchdog(controller: NetworkController, link: Link, counters: Counters) {
        var idleSeconds = 0
        var lastProgress = 0
        var stoppingSince: Int?
        let limit = watchdogSeconds * 1_000_000_000
        func fail(_ message: String) -> Never {
            // The counters first: the diagnosis takes locks a deadlock may hold.
            say("DEADLOCK: \(message); \(counters.enqueued.load(ordering: .relaxed)) enqueued, \(counters.resolved) completed")
            say("  \(diagnosis(controller, link, counters))")
            exit(1)
        }
        while !counters.finished.load(ordering: .relaxed) {
            sleep(1)
            let now = counters.nanoseconds(at: .now)
            let mainActorSilence = now - counters.heartbeat.load(ordering: .relaxed)
            if mainActorSilence > limit { fail("the main actor has not run for \(mainActorSilence / 1_000_000_000) s") }
            let poolSilence = now - counters.monitorBeat.load(ordering: .relaxed)
            if !counters.isStopping, poolSilence > limit { fail("the cooperative pool has not run the monitor for \(poolSilence / 1_000_000_000) s") }
            if counters.isStopping {
                stoppingSince = stoppingSince ?? now
                if let since = stoppingSince, now - since > 120_000_000_000 { fail("shutdown and its completions have not finished after 120 s") }
                continue
            }
            let progress = counters.succeeded.load(ordering: .relaxed) + counters.failed.load(ordering: .relaxed)
            if progress != lastProgress || counters.outstanding == 0 || link.simulator.isOffline {
                idleSeconds = 0
                lastProgress = progress
            } else {
                idleSeconds += 1
            }
            if idleSeconds >= watchdogSeconds {
                fail("no operation has completed for \(idleSeconds) s with the link online and \(counters.outstanding) outstanding")
            }
        }
    }

    static func diagnosis(_ controller: NetworkController, _ link: Link, _ counters: Counters) -> String {
        let simulator = link.simulator
        return "activity \(controller.activity), quality \(controller.quality), link offline \(simulator.isOffline), \(simulator.openTransferCount) open transfers; \(counters.enqueued.load(ordering: .relaxed)) enqueued, \(counters.resolved) completed"
    }

    static func nanoseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds) * 1_000_000_000 + Int(duration.components.attoseconds / 1_000_000_000)
    }
}

extension Atomic where Value == Int {
    /// Stores `value` if it is larger than the stored one.
    func raise(to value: Int) {
        var current = load(ordering: .relaxed)
        while value > current {
            let (exchanged, original) = compareExchange(expected: current, desired: value, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
