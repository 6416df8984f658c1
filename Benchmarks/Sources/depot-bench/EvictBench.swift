import Depot
import DepotStore
import Foundation
import GRDB
import Synchronization

/// `depot-bench evict [rows] [repeats]`: evicts half of `rows` rows (the ones
/// older than 30 days) by a `Retention` policy while a ResultsController
/// watches the whole table and a writer commits one row after another,
/// against a raw `DELETE … WHERE` of the same rows on the same data in the
/// same run. Reports the total time, the longest main-actor stall (how late a
/// 16 ms main-actor timer fires) and delivery, the longest wait of the
/// concurrent one-row writes (how long the eviction held the writer), and
/// peak RSS.
enum EvictBench {
    struct Entry: Codable, FetchableRecord, PersistableRecord, Identifiable, Equatable, Sendable {
        static let databaseTableName = "entry"
        var id: Int
        var feed: String
        var createdAt: Date
        var title: String
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("entries") { db in
            try db.create(table: "entry") { t in
                t.primaryKey("id", .integer)
                t.column("feed", .text).notNull()
                t.column("createdAt", .datetime).notNull().indexed()
                t.column("title", .text).notNull()
            }
            try db.create(table: "ping") { t in
                t.autoIncrementedPrimaryKey("id")
            }
        }
        return migrator
    }

    struct Measurement {
        var seconds: Double
        var longestStall: Duration
        var longestDelivery: Duration
        var deliveries: Int
        var longestWriteWait: Duration
        var writes: Int
        var peakRSSMegabytes: Int
    }

    static let month: TimeInterval = 30 * 86_400

    /// What the ResultsController shows: every row (each batch's commit
    /// makes it refetch them all), or the newest 1,000 (a screen's worth).
    enum Watch: String {
        case all, page
    }

    @MainActor
    static func run(rows: Int, repeats: Int, watch: Watch) async throws {
        print("evict: \(rows / 2) of \(rows) rows older than 30 days, a ResultsController watching \(watch == .all ? "the whole table" : "the newest 1,000 rows"), a writer committing one row after another, file-backed store, release build")
        var depot: [Measurement] = []
        var raw: [Measurement] = []
        for round in 0..<repeats {
            let d = try await measure(rows: rows, raw: false, watch: watch)
            let r = try await measure(rows: rows, raw: true, watch: watch)
            depot.append(d)
            raw.append(r)
            print("  run \(round + 1): Depot \(line(d)); raw DELETE \(line(r))")
        }
        let bestDepot = depot.min { $0.seconds < $1.seconds }!
        let bestRaw = raw.min { $0.seconds < $1.seconds }!
        print(String(format: "best: Depot %.3f s (%.2fx raw's %.3f s); longest main-actor stall %@ against %@; longest one-row write wait %@ against %@; peak RSS %d against %d MB",
                     bestDepot.seconds, bestDepot.seconds / bestRaw.seconds, bestRaw.seconds,
                     ms(depot.map(\.longestStall).max()!), ms(raw.map(\.longestStall).max()!),
                     ms(depot.map(\.longestWriteWait).max()!), ms(raw.map(\.longestWriteWait).max()!),
                     bestDepot.peakRSSMegabytes, bestRaw.peakRSSMegabytes))
        SummaryRow.print(summary(rows: rows, watch: watch, depot: depot, raw: raw))
    }

    /// BENCHMARKS.md's rows: the time and the writer's longest wait, then the
    /// main actor and memory. The target, that eviction holds the writer for
    /// at most one batch, is met when a one-row write waited less than under
    /// the raw `DELETE`, which holds the writer for all the rows.
    static func summary(rows: Int, watch: Watch, depot: [Measurement], raw: [Measurement]) -> [SummaryRow] {
        let bestDepot = depot.min { $0.seconds < $1.seconds }!
        let bestRaw = raw.min { $0.seconds < $1.seconds }!
        let (depotWait, rawWait) = (depot.map(\.longestWriteWait).max()!, raw.map(\.longestWriteWait).max()!)
        let (depotStall, rawStall) = (depot.map(\.longestStall).max()!, raw.map(\.longestStall).max()!)
        func milliseconds(_ duration: Duration) -> String { String(format: "%.0f", duration.seconds * 1e3) }
        let memory = "\(ms(depotStall)) (raw \(String(format: "%.1f", rawStall.seconds * 1e3))); \(bestDepot.peakRSSMegabytes) MB (raw \(bestRaw.peakRSSMegabytes))"
        let ratio = SummaryRow.times(bestDepot.seconds / bestRaw.seconds)
        switch watch {
        case .page:
            return [
                SummaryRow("evict: \(SummaryRow.grouped(Double(rows / 2))) of \(SummaryRow.grouped(Double(rows))) rows (`maxAge`), controller on newest 1,000, vs raw `DELETE`",
                           target: "writer held ≤ one batch (500 rows)",
                           String(format: "%.2f s (%@ raw's %.3f s); longest one-row write wait %@ ms (raw %@ ms)", bestDepot.seconds, ratio, bestRaw.seconds, milliseconds(depotWait), milliseconds(rawWait)),
                           met: depotWait < rawWait),
                SummaryRow("evict page: main-actor stall; peak RSS", memory),
            ]
        case .all:
            return [
                SummaryRow("evict all: the same, controller on the whole table",
                           String(format: "%@ s (best %.3f s, %@ raw's %.3f s); %@ deliveries", SummaryRow.range(depot.map(\.seconds), digits: 2), bestDepot.seconds, ratio, bestRaw.seconds,
                                  SummaryRow.range(depot.map { Double($0.deliveries) }, digits: 0))),
                SummaryRow("evict all: write wait; main-actor stall; peak RSS", "\(milliseconds(depotWait)) ms (raw \(milliseconds(rawWait))); \(memory)"),
            ]
        }
    }

    static func line(_ m: Measurement) -> String {
        String(format: "%.3f s, stall %@, delivery %@ (%d), write wait %@ (%d writes), peak RSS %d MB",
               m.seconds, ms(m.longestStall), ms(m.longestDelivery), m.deliveries, ms(m.longestWriteWait), m.writes, m.peakRSSMegabytes)
    }

    static func ms(_ duration: Duration) -> String {
        String(format: "%.1f ms", duration.seconds * 1e3)
    }

    @MainActor
    static func measure(rows: Int, raw: Bool, watch: Watch) async throws -> Measurement {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-evict-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "entries.sqlite").path
        let now = Date()
        let cutoff = now.addingTimeInterval(-month)
        do {
            // The rows, written before the measured store opens (its launch eviction would take them).
            let store = try Store(path: path, migrator: migrator)
            try await store.write { db in
                let statement = try db.makeStatement(sql: "INSERT INTO entry (id, feed, createdAt, title) VALUES (?, ?, ?, ?)")
                for id in 0..<rows {
                    // Even ids are two months old, odd ones a day old.
                    let date = id.isMultiple(of: 2) ? now.addingTimeInterval(-2 * month) : now.addingTimeInterval(-86_400)
                    try statement.execute(arguments: [id, "feed\(id % 10)", date, "entry \(id) with a title of some length"])
                }
            }
            try await store.close()
        }
        let policy = RetentionPolicy(table: "entry", keeping: [.maxAge(.seconds(Int64(month)), by: "createdAt")])
        // A delay longer than the run: the launch run and the measured one only.
        let retention = raw ? nil : Retention(policies: [policy], delay: .seconds(3600))
        // The store opens three months back, when no row was old yet: its
        // launch eviction finds nothing. Then the date moves to now.
        let currentDate = Mutex(now.addingTimeInterval(-3 * month))
        let store = try Store(path: path, migrator: migrator, retention: retention, environment: .init(date: { currentDate.withLock { $0 } }))
        let launch = try await store.evict()
        precondition(launch.totalEvicted == 0)
        currentDate.withLock { $0 = now }
        let request = watch == .all ? Entry.order(Column("id")) : Entry.order(Column("createdAt").desc, Column("id").desc).limit(1_000)
        let results = try ResultsController(store: store, request: request)
        let remaining = watch == .all ? rows / 2 : 1_000
        precondition(results.fetchedObjects.count == (watch == .all ? rows : 1_000))

        let longestDelivery = Mutex(Duration.zero)
        let deliveries = Mutex(0)
        let observation = results.start { update in
            guard update.changes != nil else { return }
            let start = ContinuousClock.now
            _ = update.snapshot.count
            let elapsed = ContinuousClock.now - start
            longestDelivery.withLock { $0 = max($0, elapsed) }
            deliveries.withLock { $0 += 1 }
        }
        defer { observation.cancel() }

        let finished = Atomic(false)
        // A frame timer on the main actor: how late each 16 ms tick comes.
        let frames = Task { @MainActor in
            let clock = ContinuousClock()
            var longest = Duration.zero
            var last = clock.now
            while !finished.load(ordering: .relaxed) {
                try? await clock.sleep(for: .milliseconds(16))
                let now = clock.now
                longest = max(longest, now - last - .milliseconds(16))
                last = now
            }
            return longest
        }
        // A writer committing one row after another, as syncs would.
        let writer = Task.detached {
            var longest = Duration.zero
            var writes = 0
            while !finished.load(ordering: .relaxed) {
                let start = ContinuousClock.now
                try? await store.write { db in try db.execute(sql: "INSERT INTO ping DEFAULT VALUES") }
                longest = max(longest, ContinuousClock.now - start)
                writes += 1
            }
            return (longest, writes)
        }

        IngestBench.resetPeakRSS()
        let start = ContinuousClock.now
        if !raw {
            let report = try await store.evict()
            if report.totalEvicted != rows / 2 { print("  Depot evicted \(report.totalEvicted) of \(rows / 2): \(report)") }
        } else {
            try await store.write { db in
                try db.execute(sql: "DELETE FROM entry WHERE createdAt < ?", arguments: [cutoff])
            }
        }
        let seconds = (ContinuousClock.now - start).seconds
        // The results catch up: the last delivery shows the rows that stay.
        if watch == .all {
            for await update in results.updates() where update.snapshot.count == remaining { break }
        }
        let peak = IngestBench.peakRSSKilobytes() / 1024
        finished.store(true, ordering: .relaxed)
        let stall = await frames.value
        let (writeWait, writes) = await writer.value
        try await store.close()
        return Measurement(
            seconds: seconds,
            longestStall: stall,
            longestDelivery: longestDelivery.withLock { $0 },
            deliveries: deliveries.withLock { $0 },
            longestWriteWait: writeWait,
            writes: writes,
            peakRSSMegabytes: peak)
    }
}
