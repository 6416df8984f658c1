import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization

/// Memory of a live feed over a long stream: `events` small `post` events in
/// simulated time, `perChunk` to a chunk, one chunk a millisecond, through
/// `NetworkSimulator` on a `ManualClock` (the script makes each chunk when it
/// is due, so the server side holds one), into a `LiveFeed` on a file-backed
/// `Store` with a `ResultsController` on the newest 50 posts (a screen).
///
/// Live heap is glibc's in-use bytes (`malloc_stats()`, mmapped chunks
/// included), read every tenth of the run after the store settled; growth is
/// the end against the reading after the first tenth (the warm-up).
///
/// glibc counts the chunks each thread keeps in its cache (tcache) as in
/// use, though the program has freed them; they fill slowly over a long run
/// (+7% here). The program's own live heap is measured with those caches
/// off, `GLIBC_TUNABLES=glibc.malloc.tcache_count=0`: the target's row.
enum LiveMemoryBench {
    static let base = URL(string: "http://live.test")!
    /// Simulated time between chunks.
    static let interval = Duration.milliseconds(1)

    /// One chunk of the stream: the events `first...last`, each a new post.
    static func chunk(_ first: Int, _ last: Int) -> String {
        var text = ""
        for id in first...last {
            text += "id: \(id)\nevent: post\ndata: {\"id\":\(id),\"author\":\"sim\",\"text\":\"event \(id)\",\"avatar\":\"/avatars/1.png\"}\n\n"
        }
        return text
    }

    /// Runs the simulator off the main actor, which the feed and the screen
    /// use; its errors say why in their description.
    static func drive(_ body: @escaping @Sendable () async throws -> Void) async throws {
        do {
            try await Task.detached { try await body() }.value
        } catch let error as NetworkSimulator.DriverError {
            throw CatchUpBench.failure("the simulation stopped: \(error.description)")
        }
    }

    @MainActor
    static func run(events: Int, perChunk: Int) async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 100_000_000, rtt: .milliseconds(20)), routes: [
            .init(path: "/timeline", body: Data("[]".utf8), headers: ["Content-Type": "application/json", "Change-Cursor": "0"]),
            .init(path: "/timeline/events") { request in
                // A reconnect resumes after the id the client kept.
                let after = Int(request.headers["Last-Event-ID"] ?? "") ?? 0
                return NetworkSimulator.StreamScript { index in
                    let first = after + index * perChunk + 1
                    guard first <= events else { return nil }  // then the stream stays open
                    return .send(chunk(first, min(first + perChunk - 1, events)), after: interval)
                }
            },
        ])
        let folder = try LiveTimeline.temporaryFolder("livememory")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "timeline.sqlite").path, migrator: LiveTimeline.migrator)
        var configuration = NetworkController.Configuration(baseURL: base, transport: simulator, environment: .init(clock: clock, seed: 1))
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        let feed = try LiveFeed(LiveTimeline.Feed(), controller: controller)
        // DEPOT_LIVEMEMORY_SCREEN=0: no results controller, to tell its share.
        let screen = ProcessInfo.processInfo.environment["DEPOT_LIVEMEMORY_SCREEN"] != "0"
        let results = screen ? try ResultsController(store: store, request: LiveTimeline.Post.newest(50)) : nil
        let live = Atomic<Bool>(false)
        let watchingStatus = Task { @MainActor in
            for await state in feed.status.updates() { live.store(state.live == .live, ordering: .relaxed) }
        }
        defer { watchingStatus.cancel() }
        let watch = feed.watch()
        defer { watch.cancel() }
        let settled = simulator.settled(with: controller)
        let chunks = (events + perChunk - 1) / perChunk
        let segments = 10
        say("livememory: \(events) post events, \(perChunk) a chunk, a chunk every \(interval) of simulated time (\(SummaryRow.grouped(Double(chunks)) ) chunks, one transaction each); NetworkSimulator on a ManualClock, LiveFeed on a file-backed Store, \(screen ? "ResultsController on the newest 50" : "no ResultsController"); heap read every \(events / segments) events")

        // The full sync, then the stream opens: time starts when it is live.
        // Between the full sync and the stream's start nothing runs: the feed's
        // main-actor task is about to enqueue the stream, which the driver cannot see.
        let working: @Sendable () -> Bool = { controller.activity.running > 0 && settled() }
        try await drive { try await simulator.run(until: { live.load(ordering: .relaxed) }, settled: working) }
        let opened = clock.elapsed
        let wallStart = ContinuousClock.now
        var heap: [Double] = []
        var rss: [Double] = []
        var threads: [Int] = []
        for segment in 1...segments {
            let target = opened + interval * (chunks * segment / segments) + .milliseconds(1)
            try await drive { try await simulator.run(until: target, settled: settled) }
            await store.settled()
            let applied = Int(try await store.ledger.cursor(for: LiveTimeline.Feed().syncKey) ?? "0") ?? 0
            let memory = SoakBench.mallocMegabytes()
            heap.append(memory?.inUse ?? .nan)
            rss.append(SoakBench.residentMegabytes())
            threads.append(SoakBench.threadCount() ?? 0)
            let wall = (ContinuousClock.now - wallStart).seconds
            say(String(format: "  %8d events applied, simulated %@, wall %.1f s (%.0f events/s): heap in use %.2f MB, malloc holds %.1f MB, RSS %.1f MB, SQLite %.2f MB; %d threads; screen shows %d posts",
                       applied, "\(clock.elapsed)", wall, Double(applied) / wall, heap.last!, memory?.system ?? .nan, rss.last!, SoakBench.sqliteMegabytes() ?? .nan, SoakBench.threadCount() ?? 0, results?.fetchedObjects.count ?? 0))
            if segment == segments, applied != events { throw CatchUpBench.failure("\(applied) of \(events) events applied") }
        }
        let wall = (ContinuousClock.now - wallStart).seconds
        let growth = (heap.last! / heap[0] - 1) * 100
        say(String(format: "  heap growth after the warm-up (%d events): %+.2f%% (%.2f → %.2f MB); RSS %+.1f%%; %.0f events/s (wall %.1f s)",
                   events / segments, growth, heap[0], heap.last!, (rss.last! / rss[0] - 1) * 100, Double(events) / wall, wall))
        // glibc gives each new thread its own caches: split the growth into
        // the segments in which the process started threads and the others.
        var held = 0.0, stepped = 0.0
        for i in heap.indices.dropFirst() {
            if threads[i] == threads[i - 1] { held += heap[i] - heap[i - 1] } else { stepped += heap[i] - heap[i - 1] }
        }
        let heldGrowth = held / heap[0] * 100
        say(String(format: "  of which while the thread count held: %+.2f%% (%+.2f MB); in segments that started threads (%d → %d): %+.2f MB",
                   heldGrowth, held, threads[0], threads.last!, stepped))
        _ = await controller.shutdown(grace: .zero)
        let threadCachesOff = ProcessInfo.processInfo.environment["GLIBC_TUNABLES"]?.contains("tcache_count=0") == true
        SummaryRow.print([
            SummaryRow("livememory: \(SummaryRow.grouped(Double(events))) events in simulated time (\(perChunk) a chunk), live heap after a \(SummaryRow.grouped(Double(events / segments)))-event warm-up, \(threadCachesOff ? "glibc's thread caches off (the program's own heap)" : "glibc's default thread caches (counted as in use)")",
                       target: threadCachesOff ? "growth ≤ 5%" : nil,
                       String(format: "%@%% (%.1f → %.1f MB; %@%% while the thread count held, %+.2f MB where it went %d → %d); %@ events/s",
                              SummaryRow.signed(growth), heap[0], heap.last!, SummaryRow.signed(heldGrowth), stepped, threads[0], threads.last!, SummaryRow.grouped(Double(events) / wall)),
                       met: threadCachesOff ? growth <= 5 : nil),
        ])
    }
}
