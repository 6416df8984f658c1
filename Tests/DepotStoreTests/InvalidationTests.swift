import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// Invalidation by key, prefix and tag; mutations that invalidate; `maxAge`
/// honoured by `refresh()` and `autoRefresh`. Real store files throughout.
@Suite(.timeLimit(.minutes(1)))
@MainActor
struct InvalidationTests {
    let base = URL(string: "http://fixtures.test")!

    func controller(_ transport: FixtureTransport, store: Store, clock: any Clock<Duration> = ContinuousClock()) -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: base, transport: transport, environment: .init(clock: clock))
        configuration.store = store
        return NetworkController(configuration: configuration)
    }

    func fetch(_ key: String, tags: Set<String> = []) -> FetchItems {
        var fetch = FetchItems(url: base.appending(path: key), key: key, tags: tags)
        fetch.timeout = .idle(.seconds(1_000_000))
        return fetch
    }

    func requests(_ transport: FixtureTransport, _ path: String) -> Int {
        transport.requests.filter { $0.url.path == path }.count
    }

    /// Waits until `status` has synced after `date` and nothing more is due:
    /// no refresh running, none queued behind it, and the ledger's last word seen.
    func settled(_ status: SyncStatus, after date: Date?) async throws {
        for await state in status.updates() where !state.isSyncing && !state.isStale && state.lastSynced != date {
            break
        }
        // A refresh queued behind that one may have begun since: its end too.
        _ = try await Recorder(status.updates()).next { !$0.isSyncing }
    }

    @Test func invalidationRefreshesEachVisibleResultExactlyOnce() async throws {
        let date = ManualDate()
        try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            let rows = try jsonData(makeItems(2))
            let transport = FixtureTransport(["/a": .data(rows), "/b": .data(rows), "/c": .data(rows)])
            let controller = controller(transport, store: store)
            // Given three results on screen, young enough for their policy, two of them tagged
            let policy = CachePolicy.cacheFirst(maxAge: .seconds(3600))
            let a = try controller.results(for: Item.bySection, refreshing: fetch("a", tags: ["lists"]), policy: policy)
            let b = try controller.results(for: Item.bySection, refreshing: fetch("b", tags: ["lists", "other"]), policy: policy)
            let c = try controller.results(for: Item.bySection, refreshing: fetch("c"), policy: policy)
            for results in [a, b, c] { await results.refreshTask?.value }
            let synced = date.now
            date.advance(by: 10)
            #expect(["/a", "/b", "/c"].map { requests(transport, $0) } == [1, 1, 1])

            // When one invalidation names a and b by tag, a again by key and by prefix, and an unknown key
            let marked = try await store.ledger.invalidate(.tag("lists"), .key("a"), .keyPrefix("a"), .key("never-synced"))
            #expect(marked == 4)  // a three times, b once: one transaction, one refresh each

            // Then a and b refresh at once, each exactly once, and c does not
            for status in [a.syncStatus, b.syncStatus].compactMap({ $0 }) { try await settled(status, after: synced) }
            #expect(["/a", "/b", "/c"].map { requests(transport, $0) } == [2, 2, 1])
            #expect(a.syncStatus?.refreshCount == 2)
            #expect(b.syncStatus?.refreshCount == 2)
            #expect(c.syncStatus?.refreshCount == 1)
            #expect(try await store.ledger.entry(for: "a")?.isStale == false)
            #expect(a.syncStatus?.lastSynced == date.now)
        }
    }

    @Test func aStaleEntryIsRefetchedByTheNextCacheFirstRead() async throws {
        let date = ManualDate()
        try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            let transport = FixtureTransport(["/a": .data(try jsonData(makeItems(2)))])
            let controller = controller(transport, store: store)
            let policy = CachePolicy.cacheFirst(maxAge: .seconds(3600))
            _ = try await controller.perform(fetch("a", tags: ["lists"]))
            date.advance(by: 10)

            // Young: a cacheFirst read makes do with the cache (and leaves the screen)
            do {
                let young = try controller.results(for: Item.bySection, refreshing: fetch("a"), policy: policy)
                #expect(young.refreshTask == nil)
            }

            // Invalidated with no results on screen: only the ledger remembers
            try await store.ledger.invalidate(.tag("lists"))
            #expect(try await store.ledger.entry(for: "a")?.isStale == true)

            // Then the next cacheFirst read refetches although the cache is 10 s old
            let next = try controller.results(for: Item.bySection, refreshing: fetch("a"), policy: policy)
            #expect(next.syncStatus?.isStale == true)
            await next.refreshTask?.value
            #expect(requests(transport, "/a") >= 2)
            #expect(try await store.ledger.entry(for: "a")?.isStale == false)
        }
    }

    /// An operation whose first write invalidates its own key, as if another
    /// write landed while the refresh was on the wire.
    struct InvalidatedMidway: CachingOperation {
        var url: URL
        let writes: Counter

        var request: NetworkRequest { .get(url) }
        var cacheKey: String { "midway" }
        var timeout: Timeout { .idle(.seconds(1_000_000)) }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Item] {
            try response.decode([Item].self)
        }

        func write(_ items: [Item], to db: Database) throws -> Int {
            writes.increment()
            if writes.value == 2 { try SyncLedger.invalidate([.key(cacheKey)], in: db) }
            return items.count
        }
    }

    @Test func anInvalidationDuringARefreshRefreshesOnceMoreAfterIt() async throws {
        let date = ManualDate()
        try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            let transport = FixtureTransport(["/m": .data(try jsonData(makeItems(1)))])
            let writes = Counter()
            let operation = InvalidatedMidway(url: base.appending(path: "m"), writes: writes)
            let results = try controller(transport, store: store).results(for: Item.bySection, refreshing: operation)
            await results.refreshTask?.value
            let status = try #require(results.syncStatus)

            // When a refresh's own transaction carries an invalidation of its key
            await status.refresh()

            // Then exactly one more refresh follows, and then nothing
            for await _ in status.updates() where writes.value == 3 && !status.isSyncing { break }
            #expect(writes.value == 3)
            #expect(status.refreshCount == 3)
        }
    }

    struct AddNote: Mutation {
        static let typeName = "AddNote.v1"
        var payload: String
        init(payload: String) { self.payload = payload }
        var request: NetworkRequest { .post("notes", json: ["text": payload]) }
        var invalidates: [CacheInvalidation] { [.tag("lists")] }
        func applyOptimistically(_ db: Database) throws {}
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    @Test func anAcceptedMutationInvalidatesWhatItDeclaresAndARefusedOneNothing() async throws {
        let date = ManualDate()
        try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            let transport = FixtureTransport(["/a": .data(try jsonData(makeItems(2))), "/notes": .status(422)])
            let controller = controller(transport, store: store)
            let results = try controller.results(for: Item.bySection, refreshing: fetch("a", tags: ["lists"]), policy: .cacheFirst(maxAge: .seconds(3600)))
            await results.refreshTask?.value
            let status = try #require(results.syncStatus)
            let outbox = Outbox(store: store, controller: controller, types: [AddNote.self])

            // A refused write changed nothing on the server: nothing is stale
            let refusedTicket = try await outbox.send(AddNote(payload: "no"))
            let refused = await refusedTicket.outcome()
            #expect(throws: DepotError.self) { try refused.get() }
            #expect(try await store.ledger.entry(for: "a")?.isStale == false)
            #expect(requests(transport, "/a") == 1)

            // An accepted one marks the tagged list stale in its commit, and the list on screen refreshes
            transport.respond(to: "/notes", with: .data(Data("{}".utf8), status: 201))
            let synced = status.lastSynced
            date.advance(by: 5)
            let accepted = try await outbox.send(AddNote(payload: "yes"))
            _ = try await accepted.outcome().get()
            try await settled(status, after: synced)
            #expect(requests(transport, "/a") == 2)
            #expect(status.refreshCount == 2)
        }
    }

    @Test func refreshAndAutoRefreshHonourMaxAge() async throws {
        let date = ManualDate()
        let clock = ManualClock()
        try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            let transport = FixtureTransport(["/a": .data(try jsonData(makeItems(2)))])
            let controller = controller(transport, store: store, clock: clock)
            try await store.write { db in try SyncLedger.recordSuccess(for: "a", at: date.now, validators: nil, in: db) }
            let status = try SyncStatus(refreshing: fetch("a"), with: controller, policy: .cacheFirst(maxAge: .seconds(150)))

            // refresh() finds a young cache enough; force goes anyway
            date.advance(by: 60)
            await status.refresh()
            #expect(requests(transport, "/a") == 0)
            await status.refresh(force: true)
            #expect(requests(transport, "/a") == 1)

            // autoRefresh every 60 s: the ticks at 60 and 120 s find the cache young, the one at 180 s does not
            status.autoRefresh(every: .seconds(60))
            for tick in 1...3 {
                await clock.sleepers(atLeast: 2)  // the loop, and the deadline watch since the transfer
                date.advance(by: 60)
                clock.advance(by: .seconds(60))
                if tick < 3 {
                    await clock.sleepers(atLeast: 2)  // the loop went round without a transfer
                    #expect(requests(transport, "/a") == 1, "tick \(tick)")
                }
            }
            for await _ in status.updates() where requests(transport, "/a") == 2 && !status.isSyncing { break }
            #expect(requests(transport, "/a") == 2)
            status.stopAutoRefresh()
        }
    }

    @Test func cacheOnlyRefreshesOnlyWhenForcedAndNeverForAnInvalidation() async throws {
        try await StoreFixtures.withStore(migrator: Item.migrator) { store in
            let transport = FixtureTransport(["/a": .data(try jsonData(makeItems(2)))])
            let controller = controller(transport, store: store)
            _ = try await controller.perform(fetch("a"))
            let results = try controller.results(for: Item.bySection, refreshing: fetch("a"), policy: .cacheOnly)
            let status = try #require(results.syncStatus)
            await status.refresh()
            try await store.ledger.invalidate(.key("a"))
            for await state in status.updates() where state.isStale { break }
            #expect(status.isSyncing == false)
            #expect(requests(transport, "/a") == 1)
            await status.refresh(force: true)
            #expect(requests(transport, "/a") == 2)
        }
    }
}

/// Validators are kept per request URL: one key fetched with other parameters
/// never sends another response's validator (against depot-server over HTTP).
@Suite(.timeLimit(.minutes(1)))
struct ValidatorsPerURLTests {
    /// Writes the numbers a `/faults/last-modified-only` answer lists, under ONE key for every count.
    struct FetchNumbers: CachingOperation {
        var url: URL
        var request: NetworkRequest { .get(url) }
        var cacheKey: String { "numbers" }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Int] {
            try response.decode([Int].self)
        }

        func write(_ numbers: [Int], to db: Database) throws -> Int {
            try db.execute(sql: "DELETE FROM number")
            for number in numbers { try db.execute(sql: "INSERT INTO number (value) VALUES (?)", arguments: [number]) }
            return numbers.count
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("numbers") { db in
            try db.create(table: "number") { t in t.primaryKey("value", .integer) }
        }
        return migrator
    }

    @Test func oneKeyWithTwoURLsNeverGetsAWrong304() async throws {
        try await DemoServer.withRunning(.init(seed: 1)) { server in
            try await StoreFixtures.withStore(migrator: Self.migrator) { store in
                let transport = AsyncHTTPClientTransport()
                var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: transport)
                configuration.store = store
                let controller = NetworkController(configuration: configuration)
                func numbers(_ count: Int) -> FetchNumbers {
                    // A secret in the query must not reach the cache file with the validators.
                    FetchNumbers(url: URL(string: server.url(for: .lastModifiedOnly(count: count)).absoluteString + "&token=hunter2")!)
                }
                func stored() async throws -> Int { try await store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM number") ?? 0 } }

                // Given 3 numbers synced, with a Last-Modified that every count shares
                #expect(try await controller.perform(numbers(3)) == .updated(3))
                // When the same key is fetched with another count: no validator of the first URL goes out,
                // so this server (which would answer 304 to it) sends the 5 numbers
                #expect(try await controller.perform(numbers(5)) == .updated(5))
                #expect(try await stored() == 5)
                // And each URL keeps its own validator: the first one gets its 304 again
                #expect(try await controller.perform(numbers(3)) == .notModified)
                #expect(try await controller.perform(numbers(5)) == .notModified)

                let urls = try await store.read { db in try String.fetchAll(db, sql: "SELECT url FROM depot_validators ORDER BY url") }
                #expect(urls.count == 2)
                #expect(urls.allSatisfy { !$0.contains("hunter2") })
                _ = await controller.shutdown(grace: .zero)
                await transport.shutdown()
            }
        }
    }

    @Test func anOlderLedgerIsBroughtUpToDate() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "old.sqlite").path
        // Given a cache file made by the previous ledger schema, with a synced key
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                CREATE TABLE depot_sync_ledger (key TEXT PRIMARY KEY NOT NULL, last_synced DOUBLE, error_code TEXT,
                    error_message TEXT, error_date DOUBLE, etag TEXT, last_modified TEXT);
                INSERT INTO depot_sync_ledger (key, last_synced, etag) VALUES ('numbers', 1000, '"old"');
                """)
        }
        try queue.close()

        // When this version opens it
        let store = try Store(path: path, migrator: Self.migrator)
        let entry = try #require(try await store.ledger.entry(for: "numbers"))
        #expect(entry.lastSynced == Date(timeIntervalSince1970: 1000))
        #expect(entry.isStale == false)
        #expect(try await store.ledger.invalidate(.key("numbers")) == 1)
        #expect(try await store.ledger.entry(for: "numbers")?.isStale == true)
        try await store.close()
    }
}
