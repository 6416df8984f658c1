#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB

/// The light path's cold start: a cached value of 1,000 structs, from
/// opening the store to the value on the main actor, against reading the
/// same JSON from a file and decoding it with `JSONDecoder`. Each
/// measurement runs in a fresh process (`depot-bench valueprobe`), so the
/// first use of SQLite, GRDB, Depot and Foundation's decoder is in it; the
/// same two are also timed in this process, a new `Store` each time, for
/// what a warm process pays.
enum ValuesBench {
    /// An article in a list: the kind of value a screen caches whole.
    struct Article: Codable, Sendable, Equatable {
        var id: Int
        var slug: String
        var title: String
        var summary: String
        var author: String
        var commentCount: Int
        var publishedAt: Date
        var imageURL: URL?
        var isFeatured: Bool
    }

    /// The operation that caches the list (its JSON body is the value).
    struct FetchArticles: CachedValueOperation {
        typealias Value = [Article]
        var request: NetworkRequest { .get("articles") }
        var cacheKey: String { "articles" }
    }

    static let count = 1000

    /// The same 1,000 articles every run.
    static func articles() -> [Article] {
        let authors = ["Ada Lovelace", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Donald Knuth", "Frances Allen", "Niklaus Wirth"]
        let topics = ["caching", "offline sync", "SQLite", "observation", "priorities", "retries", "back pressure", "schedulers"]
        return (0..<count).map { i in
            let topic = topics[i % topics.count]
            return Article(
                id: 100_000 + i,
                slug: "notes-on-\(topic.replacingOccurrences(of: " ", with: "-"))-\(i)",
                title: "Notes on \(topic), part \(i % 12 + 1)",
                summary: "What we learned about \(topic) while shipping release \(i % 40).",
                author: authors[i % authors.count],
                commentCount: (i * 37) % 500,
                publishedAt: Date(timeIntervalSince1970: 1_790_000_000 - Double(i) * 3_600.25),
                imageURL: i % 4 == 3 ? nil : URL(string: "https://cdn.example.com/img/\(i).jpg"),
                isFeatured: i % 10 == 0)
        }
    }

    /// The files a probe reads, in `folder`.
    static func jsonPath(_ folder: String) -> String { folder + "/articles.json" }
    static func storePath(_ folder: String) -> String { folder + "/cache.sqlite" }
    /// The floor's file: the same JSON in a table of its own, as a hand-written GRDB cache keeps it.
    static func floorPath(_ folder: String) -> String { folder + "/floor.sqlite" }

    /// Writes the JSON file, and caches the same value in a new store
    /// through the real path (`perform` of the operation on a fixture
    /// transport answering the file), then closes the store.
    static func setUp(in folder: String) async throws -> Int {
        let json = try JSONEncoder().encode(articles())
        try json.write(to: URL(fileURLWithPath: jsonPath(folder)))
        let store = try Store(path: storePath(folder))
        let transport = FixtureTransport(["/articles": .file(URL(fileURLWithPath: jsonPath(folder)), headers: ["Content-Type": "application/json"])])
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://fixture.test")!, transport: transport)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        _ = try await controller.perform(FetchArticles())
        let cached = try await store.read { db in try FetchArticles().cachedValue(in: db) }
        guard cached == articles() else { fatalError("the cached value is not the articles") }
        try await store.writer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        try await store.close()
        let floor = try DatabasePool(path: floorPath(folder))
        try await floor.write { db in
            try db.execute(sql: "CREATE TABLE value (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
            try db.execute(sql: "INSERT INTO value (key, value) VALUES (?, ?)", arguments: ["articles", json])
        }
        try await floor.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        try floor.close()
        return json.count
    }

    /// Depot's steps, in seconds.
    struct DepotSteps {
        var open = 0.0, controller = 0.0, value = 0.0
        var total: Double { open + controller + value }
    }

    /// `Store(path:)`, a controller on it (offline), and
    /// `value(for:policy: .cacheOnly)` until the value is there, on the main
    /// actor. Returns the store and the live value too, still open.
    @MainActor
    static func depot(_ folder: String) throws -> (DepotSteps, Store, NetworkController, LiveValue<[Article]>) {
        let start = ContinuousClock.now
        let store = try Store(path: storePath(folder))
        let opened = ContinuousClock.now
        let transport = FixtureTransport()
        transport.isOffline = true
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://fixture.test")!, transport: transport)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let made = ContinuousClock.now
        let articles = try controller.value(for: FetchArticles(), policy: .cacheOnly)
        guard let value = articles.value else { fatalError("no cached value: \(String(describing: articles.error))") }
        let end = ContinuousClock.now
        guard value.count == count, value.last?.id == 100_000 + count - 1 else { fatalError("the value has \(value.count) articles") }
        return (DepotSteps(open: (opened - start).seconds, controller: (made - opened).seconds, value: (end - made).seconds), store, controller, articles)
    }

    /// `Data(contentsOf:)` and `JSONDecoder().decode` on the main actor.
    @MainActor
    static func json(_ folder: String) throws -> (read: Double, decode: Double) {
        let start = ContinuousClock.now
        let data = try Data(contentsOf: URL(fileURLWithPath: jsonPath(folder)))
        let read = ContinuousClock.now
        let value = try JSONDecoder().decode([Article].self, from: data)
        let end = ContinuousClock.now
        guard value.count == count, value.last?.id == 100_000 + count - 1 else { fatalError("the file has \(value.count) articles") }
        return ((read - start).seconds, (end - read).seconds)
    }

    /// `depot-bench valueprobe depot|json FOLDER`: one measurement in this
    /// fresh process; prints its steps in nanoseconds on one line.
    /// `valueprobe setup FOLDER` writes the two files, for profiling a probe
    /// (`perf record … depot-bench valueprobe depot FOLDER`).
    @MainActor
    static func probe(_ arguments: [String]) async throws {
        guard arguments.count > 2 else { exit(2) }
        let folder = arguments[2]
        switch arguments[1] {
        case "setup":
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            print("\(try await setUp(in: folder)) bytes of JSON in \(jsonPath(folder)), cached in \(storePath(folder))")
        case "depot":
            let (steps, store, controller, value) = try depot(folder)
            print("depot \(nanoseconds(steps.total)) \(nanoseconds(steps.open)) \(nanoseconds(steps.controller)) \(nanoseconds(steps.value))")
            // Kept until the line is out: the process exits with them.
            withExtendedLifetime((store, controller, value)) {}
        case "grdb":
            print(try grdbFloor(folder))
        default:
            let (read, decode) = try json(folder)
            print("json \(nanoseconds(read + decode)) \(nanoseconds(read)) \(nanoseconds(decode))")
        }
        fflush(nil)
    }

    /// The floor: GRDB alone, a pool on a file holding the JSON, the blob read, decoded.
    static func grdbFloor(_ folder: String) throws -> String {
        let start = ContinuousClock.now
        let pool = try DatabasePool(path: floorPath(folder))
        let opened = ContinuousClock.now
        let data = try pool.read { db in try Data.fetchOne(db, sql: "SELECT value FROM value WHERE key = ?", arguments: ["articles"]) }
        let read = ContinuousClock.now
        let value = try JSONDecoder().decode([Article].self, from: data ?? Data())
        let end = ContinuousClock.now
        guard value.count == count else { fatalError("grdb read \(value.count)") }
        return "grdb \(nanoseconds((end - start).seconds)) \(nanoseconds((opened - start).seconds)) \(nanoseconds((read - opened).seconds)) \(nanoseconds((end - read).seconds))"
    }

    static func nanoseconds(_ seconds: Double) -> Int { Int((seconds * 1e9).rounded()) }

    /// One fresh process's measurement: its printed steps, in seconds.
    static func spawn(_ kind: String, _ folder: String) throws -> [Double] {
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let output = try NerdfeedBench.measure(me, ["valueprobe", kind, folder], capture: true).output
        let fields = output.split(separator: "\n").last?.split(separator: " ") ?? []
        guard fields.first.map(String.init) == kind, fields.count > 2 else { throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "valueprobe \(kind) printed \(output)"]) }
        return fields.dropFirst().compactMap { Double($0) }.map { $0 / 1e9 }
    }

    @MainActor
    static func run(iterations: Int) async throws {
        let folder = FileManager.default.temporaryDirectory.appending(path: "values-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let bytes = try await setUp(in: folder)
        let storeBytes = (try? FileManager.default.attributesOfItem(atPath: storePath(folder))[.size] as? Int) ?? 0
        say("values: \(count) articles, JSON \(bytes / 1024) KB, store \(storeBytes / 1024) KB, \(iterations) iterations, load average \(FirstRowsBench.loadAverage())")

        // Fresh processes: each iteration runs both, in a random order; three warm-up iterations dropped.
        // GRDB alone (a pool, the blob, the decode) is the floor any cache in SQLite pays.
        var depotCold: [[Double]] = [], jsonCold: [[Double]] = [], grdbCold: [[Double]] = []
        for iteration in 0..<(iterations + 3) {
            var (d, j, g): ([Double], [Double], [Double]) = ([], [], [])
            for kind in ["depot", "json", "grdb"].shuffled() {
                switch kind {
                case "depot": d = try spawn(kind, folder)
                case "json": j = try spawn(kind, folder)
                default: g = try spawn(kind, folder)
                }
            }
            guard iteration >= 3 else { continue }
            depotCold.append(d)
            jsonCold.append(j)
            grdbCold.append(g)
        }
        let loadAfterCold = FirstRowsBench.loadAverage()

        // This process: a new store each time, closed after it (the next open is a cold open of the file).
        var depotWarm: [[Double]] = [], jsonWarm: [[Double]] = []
        for iteration in 0..<(iterations + 3) {
            var (d, j): ([Double], [Double]) = ([], [])
            for kind in ["depot", "json"].shuffled() {
                if kind == "depot" {
                    let (steps, store, controller, value) = try depot(folder)
                    withExtendedLifetime(value) {}
                    _ = await controller.shutdown(grace: .zero)
                    try await store.close()
                    d = [steps.total, steps.open, steps.controller, steps.value]
                } else {
                    let (read, decode) = try json(folder)
                    j = [read + decode, read, decode]
                }
            }
            guard iteration >= 3 else { continue }
            depotWarm.append(d)
            jsonWarm.append(j)
        }

        func column(_ rows: [[Double]], _ index: Int) -> [Double] { rows.map { $0[index] } }
        func ms(_ values: [Double], _ q: Double) -> String { String(format: "%.2f", FirstRowsBench.percentile(values, q) * 1e3) }
        func line(_ name: String, _ values: [Double]) -> String { "\(name) median \(ms(values, 0.5)) ms, p90 \(ms(values, 0.9)) ms" }
        /// Median of the per-iteration ratios, the ratio of medians, and the ratio of p90s.
        func ratio(_ depot: [[Double]], _ json: [[Double]]) -> (paired: Double, medians: Double, p90: Double) {
            let d = column(depot, 0), j = column(json, 0)
            return (FirstRowsBench.percentile(zip(d, j).map { $0 / $1 }, 0.5),
                    FirstRowsBench.percentile(d, 0.5) / FirstRowsBench.percentile(j, 0.5),
                    FirstRowsBench.percentile(d, 0.9) / FirstRowsBench.percentile(j, 0.9))
        }
        for (title, depot, json) in [("fresh process each time (load average after: \(loadAfterCold))", depotCold, jsonCold), ("in this process, a new Store each time", depotWarm, jsonWarm)] {
            say("  \(title):")
            say(line("    Data(contentsOf:) + JSONDecoder:           ", column(json, 0)))
            say(line("      of which the read:                       ", column(json, 1)))
            say(line("      of which the decode:                     ", column(json, 2)))
            say(line("    Store + controller + value(for:) .cacheOnly:", column(depot, 0)))
            say(line("      of which Store(path:):                   ", column(depot, 1)))
            say(line("      of which NetworkController(...):         ", column(depot, 2)))
            say(line("      of which value(for:policy:):             ", column(depot, 3)))
            let r = ratio(depot, json)
            say(String(format: "    Depot / JSONDecoder: %.2fx (median of paired ratios), %.2fx (medians), %.2fx (p90s)", r.paired, r.medians, r.p90))
        }
        say(line("  fresh process, GRDB alone (pool, blob, decode):", column(grdbCold, 0)))
        say(line("      of which DatabasePool(path:):            ", column(grdbCold, 1)))
        say(line("      of which the read:                       ", column(grdbCold, 2)))
        let floor = ratio(grdbCold, jsonCold), overFloor = ratio(depotCold, grdbCold)
        say(String(format: "    GRDB alone / JSONDecoder: %.2fx; Depot / GRDB alone: %.2fx (medians of paired ratios)", floor.paired, overFloor.paired))
        say("  load average at the end: \(FirstRowsBench.loadAverage())")

        let cold = ratio(depotCold, jsonCold), warm = ratio(depotWarm, jsonWarm)
        SummaryRow.print([
            SummaryRow("values: cold process, `Store` open → `value(for:)` of 1,000 structs (277 KB of JSON) on the main actor vs `JSONDecoder` of the file",
                       target: "≤ 1.5×",
                       "\(SummaryRow.times(cold.paired)) (\(ms(column(depotCold, 0), 0.5)) vs \(ms(column(jsonCold, 0), 0.5)) ms); p90 \(ms(column(depotCold, 0), 0.9)) vs \(ms(column(jsonCold, 0), 0.9)) ms",
                       met: cold.paired <= 1.5),
            SummaryRow("values: cold process, GRDB alone (`DatabasePool`, the blob, `JSONDecoder`) vs `JSONDecoder` of the file: the floor; Depot over it",
                       "\(SummaryRow.times(floor.paired)) (\(ms(column(grdbCold, 0), 0.5)) vs \(ms(column(jsonCold, 0), 0.5)) ms); Depot over GRDB alone \(SummaryRow.times(overFloor.paired))"),
            SummaryRow("values: the same in a warm process, a new `Store` each time",
                       "\(SummaryRow.times(warm.paired)) (\(ms(column(depotWarm, 0), 0.5)) vs \(ms(column(jsonWarm, 0), 0.5)) ms); p90 \(ms(column(depotWarm, 0), 0.9)) vs \(ms(column(jsonWarm, 0), 0.9)) ms"),
        ])
    }
}
