import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import NerdfeedKit
import Testing

/// `FetchForumFeed` parses its body as it arrives (a `StreamingCachingOperation`):
/// against the real DemoServer, whose `/faults/feed` writes a feed in small
/// chunks and can cut it short or break its tail.
@Suite(.timeLimit(.minutes(1)))
struct StreamingSyncTests {
    /// Runs `body` with a server, a store and a controller over AsyncHTTPClient.
    /// With `storeConfiguration`, the store is opened with it in a temporary folder.
    func withSetup(
        retryPolicy: RetryPolicy = .never,
        maximumBodySize: Int = NetworkController.Configuration.Limits().maximumBodySize,
        storeConfiguration: GRDB.Configuration? = nil,
        _ body: (DemoServer, Store, NetworkController) async throws -> Void
    ) async throws {
        try await DemoServer.withRunning(.init(seed: 7, initialPosts: 0)) { server in
            try await withStore(configuration: storeConfiguration) { store in
                try await withController(server: server, store: store, configure: { configuration in
                    configuration.observability.notificationCenter = nil
                    configuration.retries.policy = retryPolicy
                    configuration.limits.maximumBodySize = maximumBodySize
                }) { controller in
                    try await body(server, store, controller)
                }
            }
        }
    }

    /// Runs `body` with a store in a temporary folder: the fixture's, or one opened with `configuration`.
    func withStore(configuration: GRDB.Configuration?, _ body: (Store) async throws -> Void) async throws {
        guard let configuration else {
            return try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator, body)
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("StreamingSyncTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appendingPathComponent("cache.sqlite").path, migrator: NerdfeedSchema.migrator, configuration: configuration)
        do {
            try await body(store)
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
    }

    /// What `body` threw, as a DepotError (`nil` if it did not throw).
    func failure(_ body: () async throws -> Void) async -> DepotError? {
        do {
            try await body()
            return nil
        } catch {
            return DepotError.wrap(error, operation: nil, fallback: .processing)
        }
    }

    /// The feed's items as `title` by guid.
    func titles(_ store: Store, feed: URL) async throws -> [String: String] {
        let items = try await store.read { db in try FeedItem.newestFirst(feed: feed).fetchAll(db) }
        return Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0.title) })
    }

    /// What the server's n-th answer holds: `items` titles, by guid.
    func expected(items: Int, version: Int) -> [String: String] {
        Dictionary(uniqueKeysWithValues: (0..<items).map { ("item-\($0)", "Café ☕ número \($0) v\(version)") })
    }

    @Test func aFeedStreamedInSmallChunksLandsIntact() async throws {
        try await withSetup { server, store, controller in
            // Given a feed of 3,000 items (330 KB) written 97 bytes at a time: chunks split
            // multi-byte characters, elements and the 1,000-item batches
            let feed = server.url(for: .feed(items: 3_000, chunkBytes: 97))

            // When it is synced
            let update = try await controller.perform(FetchForumFeed(url: feed))

            // Then every item landed as the server wrote it, and the ledger says synced
            #expect(update.written == FeedMerge(inserted: 3_000, updated: 0, unchanged: 0))
            #expect(try await titles(store, feed: feed) == expected(items: 3_000, version: 1))
            let entry = try await store.ledger.entry(for: FetchForumFeed(url: feed).cacheKey)
            #expect(entry?.lastSynced != nil && entry?.lastError == nil)
        }
    }

    @Test(arguments: [DemoServer.FeedTail.truncated, .malformed])
    func aBodyThatFailsHalfwayLeavesTheCacheAsItWas(tail: DemoServer.FeedTail) async throws {
        try await withSetup { server, store, controller in
            // Given a synced feed of 2,500 items
            let feed = server.url(for: .feed(items: 2_500, chunkBytes: 700, tails: [.complete, tail]))
            _ = try await controller.perform(FetchForumFeed(url: feed))
            let before = try await titles(store, feed: feed)
            #expect(before == expected(items: 2_500, version: 1))

            // When the next answer, whose every title changed, fails halfway (after
            // the first batches were merged in the open transaction)
            let error = await failure { _ = try await controller.perform(FetchForumFeed(url: feed)) }

            // Then the sync fails as the transfer or the parser says
            #expect(error?.code == (tail == .truncated ? .connectionLost : .decoding))
            // and the cache is exactly as it was: nothing of the second answer landed
            #expect(try await titles(store, feed: feed) == before)
            // and, as for a buffered body, the ledger records the parser's failure
            // but not the transfer's (the caller, or a SyncStatus, reports that one)
            let entry = try await store.ledger.entry(for: FetchForumFeed(url: feed).cacheKey)
            #expect(entry?.lastError?.code == (tail == .truncated ? nil : .decoding))
            #expect(entry?.lastSynced != nil)
            #expect(server.requestCount(for: .feed(items: 0, chunkBytes: 1)) == 2)
        }
    }

    @Test func theSizeLimitStopsAStreamedBody() async throws {
        try await withSetup(maximumBodySize: 100_000) { server, store, controller in
            // Given a chunked feed (no Content-Length) of about 330 KB, over a 100 KB limit
            let feed = server.url(for: .feed(items: 3_000, chunkBytes: 1_000, declaresLength: false))

            // When it is synced
            let error = await failure { _ = try await controller.perform(FetchForumFeed(url: feed)) }

            // Then the transfer stops at the limit and nothing lands (the ledger
            // is left to the caller, as for a buffered body over the limit)
            #expect(error?.code == .tooLarge)
            let landed = try await titles(store, feed: feed)
            #expect(landed.isEmpty)
            let entry = try await store.ledger.entry(for: FetchForumFeed(url: feed).cacheKey)
            #expect(entry == nil)
        }
    }

    @Test func aRetryAfterAMidBodyFailureWritesOnce() async throws {
        try await withSetup(retryPolicy: RetryPolicy(maximumAttempts: 2, baseDelay: .zero)) { server, store, controller in
            // Given a feed whose first answer is cut short, and a policy that retries at once
            let feed = server.url(for: .feed(items: 2_500, chunkBytes: 700, tails: [.truncated, .complete]))

            // When it is synced
            let update = try await controller.perform(FetchForumFeed(url: feed))

            // Then the second attempt wrote the feed once, over nothing of the first
            #expect(update.written == FeedMerge(inserted: 2_500, updated: 0, unchanged: 0))
            #expect(try await titles(store, feed: feed) == expected(items: 2_500, version: 2))
            #expect(server.requestCount(for: .feed(items: 0, chunkBytes: 1)) == 2)
            let entry = try await store.ledger.entry(for: FetchForumFeed(url: feed).cacheKey)
            #expect(entry?.lastSynced != nil && entry?.lastError == nil)
        }
    }

    @Test func aWriteTransactionThatCannotBeginFailsTheSync() async throws {
        // Given a store whose writes give up at once while another connection holds the write lock
        var configuration = GRDB.Configuration()
        configuration.busyMode = .timeout(0.01)
        try await withSetup(storeConfiguration: configuration) { server, store, controller in
            var blocking = GRDB.Configuration()
            blocking.allowsUnsafeTransactions = true
            let other = try DatabaseQueue(path: try #require(store.path), configuration: blocking)
            try await other.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }

            // When a feed is synced
            let feed = server.url(for: .feed(items: 3_000, chunkBytes: 97))
            let error = await failure { _ = try await controller.perform(FetchForumFeed(url: feed)) }

            // Then, once the body is in, the sync fails with the store's error
            #expect(error?.code == .storage)
            try await other.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
            try other.close()
            #expect(try await titles(store, feed: feed).isEmpty)
        }
    }

    @Test func aBodyInFlightLeavesTheStoresWriterFree() async throws {
        try await withSetup { server, store, controller in
            // Given a sync whose body stops halfway until the test lets it go on
            let feed = server.url(for: .feed(items: 3_000, chunkBytes: 1_000, tails: [.pausedHalfway]))
            let events = controller.events()
            let sync = Task { try await controller.perform(FetchForumFeed(url: feed)) }
            for await event in events where event.kind == .progress { break }

            // When another write comes while the body is in flight, it goes through at once
            try await store.write { db in
                try db.execute(sql: "INSERT INTO feedItem (feed, id, title) VALUES ('other', 'local', 'Written meanwhile')")
            }

            // Then the sync, let go, writes the whole feed
            server.openGate(DemoServer.FeedTail.halfwayGate)
            #expect(try await sync.value.written == FeedMerge(inserted: 3_000, updated: 0, unchanged: 0))
            #expect(try await titles(store, feed: feed) == expected(items: 3_000, version: 1))
            #expect(try await store.item(id: "local", feed: "other")?.title == "Written meanwhile")
        }
    }

    @Test func cancellingASyncMidBodyWritesNothing() async throws {
        try await withSetup { server, store, controller in
            // Given a long feed whose body has begun to arrive
            let feed = server.url(for: .feed(items: 50_000, chunkBytes: 1_000))
            let events = controller.events()
            let sync = Task { try await controller.perform(FetchForumFeed(url: feed)) }
            for await event in events where event.kind == .progress { break }

            // When its only caller cancels it
            sync.cancel()
            let error = await failure { _ = try await sync.value }

            // Then it ends as cancelled, nothing landed, the ledger is untouched,
            // and the store's writer is free
            #expect(error?.code == .cancelled)
            #expect(try await titles(store, feed: feed).isEmpty)
            #expect(try await store.ledger.entry(for: FetchForumFeed(url: feed).cacheKey) == nil)
            try await store.write { db in try db.execute(sql: "SELECT 1") }
        }
    }

    @Test func aCoalescedCallerThatCancelsLeavesTheStreamedSyncToTheOther() async throws {
        try await withSetup { server, store, controller in
            // Given two callers of one feed, coalesced on one streamed job
            let feed = server.url(for: .feed(items: 20_000, chunkBytes: 1_000))
            let events = controller.events()
            let first = Task { try await controller.perform(FetchForumFeed(url: feed)) }
            let second = Task { try await controller.perform(FetchForumFeed(url: feed)) }
            var coalesced = false
            for await event in events {
                if event.kind == .coalesced { coalesced = true }
                if coalesced, event.kind == .progress { break }
            }

            // When the first cancels while the body streams in
            first.cancel()

            // Then the first ends cancelled, and the second gets the whole feed, written once
            let error = await failure { _ = try await first.value }
            #expect(error?.code == .cancelled)
            let update = try await second.value
            #expect(update.written == FeedMerge(inserted: 20_000, updated: 0, unchanged: 0))
            #expect(try await titles(store, feed: feed).count == 20_000)
            #expect(server.requestCount(for: .feed(items: 0, chunkBytes: 1)) == 1)
        }
    }
}
