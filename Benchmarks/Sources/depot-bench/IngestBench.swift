import Depot
import DepotStore
import Foundation
import GRDB

/// Decode-and-upsert throughput: 100,000 small items through a `CachingOperation`
/// (FileTransport → controller → parse → one write transaction) against the
/// hand-written raw path in the same run (JSONDecoder, then one prepared
/// `INSERT OR REPLACE` in one transaction), and GRDB's per-record `upsert`.
enum IngestBench {
    struct Song: Codable, Sendable, FetchableRecord, PersistableRecord {
        var id: Int
        var title: String
        var artist: String
        var rank: Int
        var url: String
    }

    static let insertSQL = "INSERT OR REPLACE INTO song (id, title, artist, rank, url) VALUES (?, ?, ?, ?, ?)"

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("songs") { db in
            try db.create(table: "song") { t in
                t.primaryKey("id", .integer)
                t.column("title", .text).notNull()
                t.column("artist", .text).notNull()
                t.column("rank", .integer).notNull()
                t.column("url", .text).notNull()
            }
        }
        return migrator
    }

    /// Parse, then write with one prepared statement.
    struct IngestSongs: CachingOperation {
        var url: URL
        var request: NetworkRequest { .get(url) }
        var cacheKey: String { "songs" }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Song] {
            try response.decode([Song].self)
        }

        func write(_ songs: [Song], to db: Database) throws -> Int {
            try IngestBench.insert(songs, db: db)
        }
    }

    /// Parse chunks on another core while this one writes.
    struct OverlappedIngestSongs: CachingOperation {
        var url: URL
        var request: NetworkRequest { .get(url) }
        var cacheKey: String { "songs" }

        func write(_ response: NetworkResponse, to db: Database) throws -> Int {
            try JSONArrayIngest.decode(Song.self, from: response.body, into: db) { db, songs in
                _ = try IngestBench.insert(songs, db: db)
            }
        }
    }

    static func insert(_ songs: [Song], db: Database) throws -> Int {
        let statement = try db.cachedStatement(sql: insertSQL)
        for song in songs {
            statement.setUncheckedArguments([song.id, song.title, song.artist, song.rank, song.url])
            try statement.execute()
        }
        return songs.count
    }

    static func run(items: Int, repeats: Int) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-ingest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let songs = (0..<items).map { i in
            Song(id: i, title: "Song number \(i)", artist: "Artist \(i % 997)", rank: i % 100, url: "https://music.example/songs/\(i)")
        }
        let file = folder.appending(path: "songs.json")
        try JSONEncoder().encode(songs).write(to: file)
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int ?? 0
        print("ingest: \(items) items, \(size / 1024) KB of JSON, best of \(repeats), release build")

        var run = 0
        func freshStore() throws -> Store {
            run += 1
            return try Store(path: folder.appending(path: "db\(run).sqlite").path, migrator: migrator)
        }

        let raw = try await measure("raw: JSONDecoder + one prepared INSERT OR REPLACE", items: items, repeats: repeats) {
            let store = try freshStore()
            let data = try Data(contentsOf: file)
            let songs = try JSONDecoder().decode([Song].self, from: data)
            _ = try await store.writer.write { db in try insert(songs, db: db) }
        }
        var depotTimes: [Bool: Double] = [:]  // by overlapped
        for (label, overlapped) in [("Depot: CachingOperation (parse, then write)", false), ("Depot: CachingOperation, parse overlapped with write", true)] {
            let depot = try await measure(label, items: items, repeats: repeats) {
                let store = try freshStore()
                var configuration = NetworkController.Configuration(transport: FileTransport())
                configuration.store = store
                let controller = NetworkController(configuration: configuration)
                if overlapped {
                    _ = try await controller.perform(OverlappedIngestSongs(url: file))
                } else {
                    _ = try await controller.perform(IngestSongs(url: file))
                }
                _ = await controller.shutdown(grace: .zero)
            }
            print(String(format: "  → %.2fx the raw path", raw / depot))
            depotTimes[overlapped] = depot
        }
        _ = try await measure("GRDB per-record upsert (the trap)", items: items, repeats: 1) {
            let store = try freshStore()
            let songs = try JSONDecoder().decode([Song].self, from: Data(contentsOf: file))
            try await store.writer.write { db in for song in songs { try song.upsert(db) } }
        }
        SummaryRow.print([
            (true, "ingest: \(SummaryRow.grouped(Double(items))) items, `CachingOperation` overlapped vs raw"),
            (false, "ingest: the same, plain `CachingOperation` vs raw"),
        ].map { overlapped, figure in
            let depot = depotTimes[overlapped]!
            return SummaryRow(figure, target: "≥ 0.8× raw", String(format: "%@ (%.3f s)", SummaryRow.times(raw / depot), depot), met: raw / depot >= 0.8)
        })
    }

    /// Runs `body` `repeats` times, prints the best time, items/s and the peak
    /// RSS of the best run, and returns the best time in seconds.
    static func measure(_ label: String, items: Int, repeats: Int, _ body: () async throws -> Void) async throws -> Double {
        var best = Double.infinity
        var peak = 0
        for _ in 0..<repeats {
            resetPeakRSS()
            let start = ContinuousClock.now
            try await body()
            let seconds = (ContinuousClock.now - start).seconds
            if seconds < best {
                best = seconds
                peak = peakRSSKilobytes()
            }
        }
        print(String(format: "%@: %.3f s, %.0f items/s, peak RSS %d MB", label, best, Double(items) / best, peak / 1024))
        return best
    }

    /// Resets the kernel's high-water mark of this process (Linux), so each run's peak is its own.
    static func resetPeakRSS() {
        try? "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    }

    static func peakRSSKilobytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}
