import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import DepotStore
import Foundation
import GRDB
import NIOCore

/// Catch-up: `changes` changes through the change feed, against a full
/// refetch of a `rows`-row collection, over loopback from a release
/// depot-server in its own process.
///
/// Each round, in a new file-backed store: (a) `LiveFeed.catchUp()` on the
/// empty cache, the full sync (`GET /timeline?limit=100000`, the rows
/// replaced in one transaction); then the server makes `changes` changes
/// (half posts, half deletes, so the collection keeps its size) and (b)
/// `catchUp()` brings them in pages of 500; then (c) the refetch an app
/// without a change feed makes: the whole list again as a `CachingOperation`
/// that upserts every row and deletes those no longer listed.
enum CatchUpBench {
    /// The whole timeline as a `CachingOperation`: what an app without a change
    /// feed runs to see what changed (TimelineKit's `FetchTimeline` for every
    /// post, also deleting the posts the list no longer has).
    struct RefetchTimeline: CachingOperation {
        var limit = 100_000
        var request: NetworkRequest { .get("timeline", query: ["limit": "\(limit)"]) }
        var cacheKey: String { "timeline" }
        var priority: Priority { .high }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [LiveTimeline.Post] {
            try response.decode([LiveTimeline.Post].self)
        }

        func write(_ posts: [LiveTimeline.Post], to db: Database) throws {
            var gone = Set(try Int.fetchAll(db, sql: "SELECT id FROM post"))
            for post in posts {
                if gone.remove(post.id) != nil { try post.update(db) } else { try post.insert(db) }
            }
            for id in gone { _ = try LiveTimeline.Post.deleteOne(db, key: id) }
        }
    }

    /// One round's times, in seconds.
    struct Round {
        var full: Double
        var catchUp: Double
        var pages: Int
        var refetch: Double
        /// The same requests as the full sync and the catch-up, with raw
        /// AsyncHTTPClient: the bodies read, nothing decoded or written.
        var rawFull: Double
        var rawPages: Double
    }

    @MainActor
    static func run(binaries: String, rows: Int, changes: Int, repeats: Int) async throws {
        let depotServer = try DepotServerProcess.start("\(binaries)/depot-server", arguments: ["--port", "0", "--timeline-posts", "\(rows)", "--change-history", "\(2 * changes)"])
        defer { depotServer.stop() }
        let base = URL(string: depotServer.base)!
        say("catchup: depot-server \(binaries)/depot-server at \(base) with \(rows) posts; per round a new file-backed store, AsyncHTTPClientTransport; \(changes) changes (\(changes / 2) posts, \(changes / 2) deletes) through /_control; \(repeats) rounds")
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        var rounds: [Round] = []
        do {
            for round in 1...max(1, repeats) {
                let times = try await measureRound(base: base, client: client, changes: changes, expectedRows: rows)
                rounds.append(times)
                say(String(format: "  round %d: full sync %.3f s (raw GET %.3f s), catch-up %.3f s (%d pages; raw GETs %.3f s), refetch %.3f s", round, times.full, times.rawFull, times.catchUp, times.pages, times.rawPages, times.refetch))
            }
            try await client.shutdown()
        } catch {
            try? await client.shutdown()
            throw error
        }
        let median = { (values: [Double]) in LiveTimeline.quantile(values, 0.5) }
        let (full, caughtUp, refetched) = (rounds.map(\.full), rounds.map(\.catchUp), rounds.map(\.refetch))
        let pages = rounds.last?.pages ?? 0
        let ratio = median(caughtUp) / median(full)
        say(String(format: "  medians: full sync %.3f s, catch-up %.3f s (%.1f%% of it), CachingOperation refetch %.3f s (catch-up %.1f%% of it); raw GETs: the full list %.3f s, the pages %.3f s (%.1f%%)",
                   median(full), median(caughtUp), ratio * 100, median(refetched), median(caughtUp) / median(refetched) * 100,
                   median(rounds.map(\.rawFull)), median(rounds.map(\.rawPages)), median(rounds.map(\.rawPages)) / median(rounds.map(\.rawFull)) * 100))
        let count = SummaryRow.grouped
        SummaryRow.print([
            SummaryRow("catchup: \(count(Double(changes))) changes through the change feed vs a full refetch of \(count(Double(rows))) rows (`LiveFeed` full sync)",
                       target: "≤ 25% of the refetch",
                       String(format: "%.1f%% (%.3f vs %.3f s, medians of %d; %d pages)", ratio * 100, median(caughtUp), median(full), full.count, pages),
                       met: ratio <= 0.25),
            SummaryRow("catchup: the refetch as a `CachingOperation` upserting into the synced cache",
                       String(format: "%.3f s; catch-up %.1f%% of it", median(refetched), median(caughtUp) / median(refetched) * 100)),
        ])
    }

    /// One round in a new store: the full sync, the catch-up, the refetch, in seconds.
    @MainActor
    static func measureRound(base: URL, client: HTTPClient, changes: Int, expectedRows: Int) async throws -> Round {
        let folder = try LiveTimeline.temporaryFolder("catchup")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "timeline.sqlite").path, migrator: LiveTimeline.migrator)
        let transport = AsyncHTTPClientTransport()
        var configuration = NetworkController.Configuration(baseURL: base, transport: transport)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        do {
            let times = try await measure(controller, store: store, base: base, client: client, changes: changes, expectedRows: expectedRows)
            _ = await controller.shutdown(grace: .zero)
            await transport.shutdown()
            return times
        } catch {
            _ = await controller.shutdown(grace: .zero)
            await transport.shutdown()
            throw error
        }
    }

    @MainActor
    static func measure(_ controller: NetworkController, store: Store, base: URL, client: HTTPClient, changes: Int, expectedRows: Int) async throws -> Round {
        let feed = try LiveFeed(LiveTimeline.Feed(), controller: controller)
        let rowCount = { try await store.read { db in try LiveTimeline.Post.fetchCount(db) } }

        var start = ContinuousClock.now
        let first = try await feed.catchUp()
        let full = (ContinuousClock.now - start).seconds
        let before = try await rowCount()
        guard first.fullSync, before == expectedRows else { throw failure("the full sync brought \(before) rows, not \(expectedRows)") }

        start = ContinuousClock.now
        let bytes = try await get(client, base.absoluteString + "/timeline?limit=100000")
        let rawFull = (ContinuousClock.now - start).seconds
        guard bytes > 0 else { throw failure("GET /timeline sent nothing") }

        try await control(client, base: base, #"{"timelineChanges": {"posts": \#(changes / 2), "deletes": \#(changes - changes / 2)}}"#)
        start = ContinuousClock.now
        let report = try await feed.catchUp()
        let catchUp = (ContinuousClock.now - start).seconds
        guard !report.fullSync, report.changes == changes else { throw failure("the catch-up applied \(report.changes) changes (full sync: \(report.fullSync)), not \(changes)") }

        // The catch-up's pages again, raw: the server's and the network's share.
        let feedPages = LiveTimeline.Feed()
        start = ContinuousClock.now
        for page in 0..<report.pages {
            let since = Int(first.cursor)! + page * feedPages.pageSize
            _ = try await get(client, base.absoluteString + "/timeline/changes?since=\(since)&limit=\(feedPages.pageSize)")
        }
        let rawPages = (ContinuousClock.now - start).seconds

        start = ContinuousClock.now
        _ = try await controller.perform(RefetchTimeline())
        let refetch = (ContinuousClock.now - start).seconds
        let after = try await rowCount()
        guard after == expectedRows else { throw failure("the refetch left \(after) rows, not \(expectedRows)") }
        return Round(full: full, catchUp: catchUp, pages: report.pages, refetch: refetch, rawFull: rawFull, rawPages: rawPages)
    }

    /// A GET with raw AsyncHTTPClient; returns the body's size.
    static func get(_ client: HTTPClient, _ url: String) async throws -> Int {
        let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 28)
        guard response.status == .ok else { throw failure("GET \(url) answered \(response.status)") }
        return body.readableBytes
    }

    static func control(_ client: HTTPClient, base: URL, _ json: String) async throws {
        var request = HTTPClientRequest(url: base.absoluteString + "/_control")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: json))
        let response = try await client.execute(request, timeout: .seconds(60))
        _ = try await response.body.collect(upTo: 1 << 20)
        guard response.status == .ok else { throw failure("POST /_control answered \(response.status)") }
    }

    static func failure(_ text: String) -> CocoaError {
        CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: text])
    }
}
