import DepotStore
import Foundation
import GRDB
import Synchronization

/// Change-set latency of a 10,000-row ResultsController after a commit that
/// changes 1% and then 10% of the rows, against a CollectionDifference baseline
/// and a plain refetch.
enum ChangeSetBench {
    struct Row: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
        var id: Int
        var section: String
        var rank: Int
        var title: String
        static let databaseTableName = "row"

        init(id: Int, section: String, rank: Int, title: String) {
            (self.id, self.section, self.rank, self.title) = (id, section, rank, title)
        }

        /// Decoding by column index: GRDB's fast path (Codable decoding of 10,000
        /// rows costs several times more, and would dominate every measurement).
        init(row: GRDB.Row) {
            (id, section, rank, title) = (row[0], row[1], row[2], row[3])
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("rows") { db in
            try db.create(table: "row") { t in
                t.primaryKey("id", .integer)
                t.column("section", .text).notNull()
                t.column("rank", .integer).notNull()
                t.column("title", .text).notNull()
            }
        }
        return migrator
    }

    static let request = Row.select(Column("id"), Column("section"), Column("rank"), Column("title")).order(Column("section"), Column("rank"), Column("id"))

    /// Changes `fraction` of the rows: a quarter updated in place, a quarter
    /// re-ranked (moves), a quarter deleted and as many inserted.
    static func churn(_ fraction: Double, rows: Int, round: Int, db: Database) throws {
        let changed = Int(Double(rows) * fraction)
        let ids = try Int.fetchAll(db, sql: "SELECT id FROM row ORDER BY (id * 7919 + ?) % 10007 LIMIT ?", arguments: [round, changed])
        let quarter = max(1, changed / 4)
        for (i, id) in ids.enumerated() {
            switch i / quarter {
            case 0: try db.execute(sql: "UPDATE row SET title = title || '!' WHERE id = ?", arguments: [id])
            case 1: try db.execute(sql: "UPDATE row SET rank = (rank * 31 + 17) % 100000 WHERE id = ?", arguments: [id])
            default: try db.execute(sql: "DELETE FROM row WHERE id = ?", arguments: [id])
            }
        }
        let inserted = changed - 2 * quarter
        let next = (try Int.fetchOne(db, sql: "SELECT MAX(id) FROM row") ?? 0) + 1
        for i in 0..<inserted {
            try Row(id: next + i, section: "s\((next + i) % 20)", rank: (next + i) * 13 % 100000, title: "new \(next + i)").insert(db)
        }
    }

    @MainActor
    static func run(rows: Int, repeats: Int) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-changesets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "rows.sqlite").path, migrator: migrator)
        try await store.write { db in
            for i in 0..<rows {
                try Row(id: i, section: "s\(i % 20)", rank: i * 7 % 100000, title: "row \(i)").insert(db)
            }
        }
        print("changesets: \(rows) rows in 20 sections, file-backed store, median of \(repeats) commits, release build")
        let results = try ResultsController(store: store, request: request, sectionedBy: { $0.section })
        var round = 0
        var medians: [(endToEnd: Double, diff: Double, baseline: Double, refetch: Double)] = []  // 1%, then 10%

        for fraction in [0.01, 0.10] {
            var endToEnd: [Double] = []
            var depotCompute: [Double] = []
            var baseline: [Double] = []
            var refetch: [Double] = []
            for _ in 0..<repeats {
                round += 1
                // Depot end to end: commit → change set delivered on the main actor.
                let before = results.snapshot
                let stream = results.updates()
                var iterator = stream.makeAsyncIterator()
                _ = await iterator.next() // the current snapshot
                let seed = round
                // The clock starts when the transaction's statements are done, just
                // before COMMIT (observation may begin before the writer's caller
                // resumes), and stops at the delivery on the main actor.
                let committed = Mutex(ContinuousClock.now)
                try await store.write { db in
                    try churn(fraction, rows: rows, round: seed, db: db)
                    committed.withLock { $0 = ContinuousClock.now }
                }
                let update = await iterator.next()
                endToEnd.append(committed.withLock { ContinuousClock.now - $0 }.seconds)
                guard let after = update?.snapshot else { throw CocoaError(.featureUnsupported) }

                // The parts, measured alone on the same data.
                // A plain refetch: a synchronous read, as an app would do instead.
                var start = ContinuousClock.now
                let fetched = try syncRefetch(store)
                refetch.append((ContinuousClock.now - start).seconds)

                start = ContinuousClock.now
                let snapshot = ResultsSnapshot(rows: fetched, sectionKey: { $0.section })
                let changes = ResultsChangeSet(from: before, to: snapshot)
                depotCompute.append((ContinuousClock.now - start).seconds)
                guard !changes.isEmpty, snapshot.count == after.count else { throw CocoaError(.featureUnsupported) }

                // Baseline: CollectionDifference (with move inference) on the flat rows.
                start = ContinuousClock.now
                let difference = fetched.difference(from: before.fetchedObjects).inferringMoves()
                baseline.append((ContinuousClock.now - start).seconds)
                guard !difference.isEmpty else { throw CocoaError(.featureUnsupported) }
            }
            let (e, d, b, r) = (median(endToEnd), median(depotCompute), median(baseline), median(refetch))
            print(String(format: "%2.0f%% churn: Depot, COMMIT → change set on the main actor: %.2f ms = %.2fx a plain refetch (%.2f ms)", fraction * 100, e * 1e3, e / r, r * 1e3))
            print(String(format: "           baseline, refetch + CollectionDifference.inferringMoves: %.2f ms → Depot is %.1fx faster", (r + b) * 1e3, (r + b) / e))
            print(String(format: "           diff alone: snapshot + Heckel diff %.2f ms vs CollectionDifference %.2f ms (%.0fx)", d * 1e3, b * 1e3, b / d))
            medians.append((e, d, b, r))
        }
        let tenth = medians[1]
        SummaryRow.print([
            SummaryRow("changesets: \(SummaryRow.grouped(Double(rows))) rows, COMMIT → change set, 1% / 10% churn", target: "≤ 2× plain refetch",
                       medians.map { String(format: "%@ (%.2f ms)", SummaryRow.times($0.endToEnd / $0.refetch), $0.endToEnd * 1e3) }.joined(separator: " / "),
                       met: medians.allSatisfy { $0.endToEnd <= 2 * $0.refetch }),
            SummaryRow("changesets: diff vs `CollectionDifference`, 10% churn", target: "≥ 10× faster",
                       String(format: "%@ (%.2f vs %.2f ms); %@ with the refetch", SummaryRow.times(tenth.baseline / tenth.diff), tenth.diff * 1e3, tenth.baseline * 1e3,
                              SummaryRow.times((tenth.refetch + tenth.baseline) / tenth.endToEnd)),
                       met: tenth.baseline >= 10 * tenth.diff),
        ])
    }

    /// A synchronous read, kept out of async code (where the async overload wins).
    static func syncRefetch(_ store: Store) throws -> [Row] {
        try store.writer.read { db in try request.fetchAll(db) }
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[sorted.count / 2]
    }
}
