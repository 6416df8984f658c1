import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// `Cache-Control`, `Age` and `Expires` as the store reads them: the
/// directives, then the freshness they give.
@Suite struct FreshnessTests {
    /// What a `CacheControl` holds, flattened for the table.
    struct Directives: Equatable, CustomStringConvertible {
        var maxAge: Int?
        var swr: Int?
        var noCache = false
        var noStore = false
        var mustRevalidate = false

        init(maxAge: Int? = nil, swr: Int? = nil, noCache: Bool = false, noStore: Bool = false, mustRevalidate: Bool = false) {
            (self.maxAge, self.swr, self.noCache, self.noStore, self.mustRevalidate) = (maxAge, swr, noCache, noStore, mustRevalidate)
        }

        init(_ directives: CacheControl) {
            self.init(maxAge: directives.maxAge, swr: directives.staleWhileRevalidate, noCache: directives.noCache,
                      noStore: directives.noStore, mustRevalidate: directives.mustRevalidate)
        }

        var description: String { "max-age \(maxAge.map(String.init) ?? "-") swr \(swr.map(String.init) ?? "-") no-cache \(noCache) no-store \(noStore) must-revalidate \(mustRevalidate)" }
    }

    /// Header lines → directives.
    @Test(arguments: [
        // Each directive
        (["max-age=60"], Directives(maxAge: 60)),
        (["no-cache"], Directives(noCache: true)),
        (["no-store"], Directives(noStore: true)),
        (["stale-while-revalidate=30"], Directives(swr: 30)),
        (["must-revalidate"], Directives(mustRevalidate: true)),
        // Case, quotes, whitespace, leading zeros
        (["MAX-AGE=60"], Directives(maxAge: 60)),
        (["Max-Age=\"60\""], Directives(maxAge: 60)),
        (["  max-age = 60  "], Directives(maxAge: 60)),
        (["max-age=0060"], Directives(maxAge: 60)),
        (["No-Store"], Directives(noStore: true)),
        // Combinations, a comma inside quotes, several lines
        (["public, max-age=60, stale-while-revalidate=30"], Directives(maxAge: 60, swr: 30)),
        (["no-cache=\"Set-Cookie, X-Token\", max-age=60"], Directives(maxAge: 60, noCache: true)),
        (["private=\"a,b\", no-store"], Directives(noStore: true)),
        (["max-age=60", "no-cache"], Directives(maxAge: 60, noCache: true)),
        (["max-age=60, must-revalidate, stale-while-revalidate=5"], Directives(maxAge: 60, swr: 5, mustRevalidate: true)),
        // Duplicates: the most restrictive
        (["max-age=60, max-age=30"], Directives(maxAge: 30)),
        (["max-age=30", "max-age=60"], Directives(maxAge: 30)),
        (["stale-while-revalidate=90, stale-while-revalidate=10"], Directives(swr: 10)),
        (["max-age=60, max-age=soon"], Directives(maxAge: 0)),
        // Malformed values: a max-age that is not a number is stale
        (["max-age=abc"], Directives(maxAge: 0)),
        (["max-age=-1"], Directives(maxAge: 0)),
        (["max-age=1.5"], Directives(maxAge: 0)),
        (["max-age"], Directives(maxAge: 0)),
        (["max-age="], Directives(maxAge: 0)),
        (["max-age=60 seconds"], Directives(maxAge: 0)),
        (["stale-while-revalidate=later"], Directives(swr: 0)),
        // Huge numbers clamp at 2^31
        (["max-age=99999999999999999999999"], Directives(maxAge: 1 << 31)),
        (["max-age=2147483649"], Directives(maxAge: 1 << 31)),
        // Garbage is ignored
        ([""], Directives()),
        ([",,, ;;, max-age=10, =5, \"quoted\", ,"], Directives(maxAge: 10)),
        (["s-maxage=600, public, immutable, stale-if-error=60, proxy-revalidate"], Directives()),
        (["max-age=\"60\"x, no-store"], Directives(noStore: true)),
        (["max-age@=60, no-cache"], Directives(noCache: true)),
        (["private=\"never closed, max-age=60"], Directives()),
    ])
    func cacheControl(lines: [String], expected: Directives) {
        #expect(Directives(CacheControl(lines)) == expected, "\(lines)")
    }

    static let received = Date(timeIntervalSince1970: 1_000_000_000)  // 2001: far from any server's clock
    static let serverNow = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01 00:00:00 GMT
    static func http(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    /// Headers → fresh until, and stale-while-revalidate until (seconds after
    /// the local receive time), and whether the validators are kept.
    @Test(arguments: [
        (["Cache-Control": "max-age=60"], 60, nil, true),
        (["Cache-Control": "max-age=60", "Age": "10"], 50, nil, true),
        (["Cache-Control": "max-age=60", "Age": "100"], -40, nil, true),
        (["Cache-Control": "max-age=60", "Age": "ten"], 60, nil, true),
        (["Cache-Control": "max-age=60, stale-while-revalidate=30"], 60, 90, true),
        (["Cache-Control": "max-age=60, stale-while-revalidate=30", "Age": "10"], 50, 80, true),
        (["Cache-Control": "max-age=60, stale-while-revalidate=30, must-revalidate"], 60, nil, true),
        (["Cache-Control": "stale-while-revalidate=30"], nil, nil, true),
        (["Cache-Control": "no-cache, max-age=60, stale-while-revalidate=30", "Age": "5"], 0, nil, true),
        (["Cache-Control": "no-store, max-age=60"], nil, nil, false),
        (["Cache-Control": "no-store, no-cache"], nil, nil, false),
        // Expires: its distance from the server's Date, counted from the local receive time
        (["Expires": http(serverNow + 120), "Date": http(serverNow)], 120, nil, true),
        (["Expires": http(serverNow + 120), "Date": http(serverNow), "Age": "20"], 100, nil, true),
        (["Expires": http(serverNow - 120), "Date": http(serverNow)], 0, nil, true),
        (["Expires": "Thursday, 01-Jan-26 00:02:00 GMT", "Date": http(serverNow)], 120, nil, true),
        (["Expires": "Thu Jan  1 00:02:00 2026", "Date": http(serverNow)], 120, nil, true),
        // Without a Date, against the local receive time
        (["Expires": http(received + 300)], 300, nil, true),
        // An invalid Expires is already expired; a bad Date falls back on the receive time
        (["Expires": "0", "Date": http(serverNow)], 0, nil, true),
        (["Expires": "tomorrow"], 0, nil, true),
        (["Expires": http(received + 300), "Date": "yesterday"], 300, nil, true),
        // max-age wins over Expires
        (["Cache-Control": "max-age=60", "Expires": http(serverNow + 3600), "Date": http(serverNow)], 60, nil, true),
        (["Cache-Control": "public", "Expires": http(serverNow + 30), "Date": http(serverNow)], 30, nil, true),
        // Nothing said: no freshness
        ([:], nil, nil, true),
        (["ETag": "\"v1\""], nil, nil, true),
    ] as [(HeaderFields, Int?, Int?, Bool)])
    func freshness(headers: HeaderFields, freshFor: Int?, revalidatesFor: Int?, keepsValidators: Bool) {
        let freshness = Freshness(headers, receivedAt: Self.received)
        #expect(freshness.freshUntil == freshFor.map { Self.received + TimeInterval($0) }, "\(headers)")
        #expect(freshness.staleWhileRevalidateUntil == revalidatesFor.map { Self.received + TimeInterval($0) }, "\(headers)")
        #expect(freshness.keepsValidators == keepsValidators, "\(headers)")
    }

    /// A cache file of the version before freshness (every table in place,
    /// the ledger without its two columns) is brought up to date when a store
    /// opens it: its entries are stale for `.cacheFirst` until they sync.
    @Test func aLedgerWithoutFreshnessColumnsGetsThem() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "previous.sqlite").path
        try await Store(path: path).close()
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: """
                ALTER TABLE depot_sync_ledger DROP COLUMN fresh_until;
                ALTER TABLE depot_sync_ledger DROP COLUMN swr_until;
                INSERT INTO depot_sync_ledger (key, last_synced) VALUES ('k', 1000);
                """)
        }
        try queue.close()

        let store = try Store(path: path)
        let old = try #require(try await store.ledger.entry(for: "k"))
        #expect(old.lastSynced == Date(timeIntervalSince1970: 1000))
        #expect(old.freshUntil == nil)
        #expect(CachePolicy.cacheFirst.refresh(for: old, now: Date(timeIntervalSince1970: 1001)) == .needed)
        let freshness = Freshness(["Cache-Control": "max-age=60, stale-while-revalidate=30"], receivedAt: Date(timeIntervalSince1970: 2000))
        try await store.write { db in
            try SyncLedger.recordSuccess(for: "k", at: Date(timeIntervalSince1970: 2000), validators: nil, in: db)
            try SyncLedger.recordFreshness(freshness, for: "k", url: nil, in: db)
        }
        let entry = try #require(try await store.ledger.entry(for: "k"))
        #expect(entry.freshUntil == Date(timeIntervalSince1970: 2060))
        #expect(entry.staleWhileRevalidateUntil == Date(timeIntervalSince1970: 2090))
        try await store.close()
    }
}

/// `CachePolicy.cacheFirst` against depot-server over real HTTP on
/// 127.0.0.1, on a `ManualDate`: the server's `Cache-Control`, `Age` and
/// `Expires` decide when a refresh goes out, and the server counts what does.
@Suite(.timeLimit(.minutes(1)))
@MainActor
struct ServerFreshnessTests {
    /// Writes the `message` of a `{"message": ...}` answer as item 1.
    struct FetchGreeting: CachingOperation {
        struct Greeting: Decodable, Sendable { var message: String }
        var url: URL
        var key: String

        var request: NetworkRequest { .get(url) }
        var cacheKey: String { key }

        func write(_ greeting: Greeting, to db: Database) throws -> Int {
            try Item(id: 1, section: "s", rank: 1, title: greeting.message).upsert(db)
            return 1
        }
    }

    /// One test's world: the server, a store and a controller on `date`.
    struct World {
        let server: DemoServer
        let store: Store
        let controller: NetworkController
        let date: ManualDate
        let fault: DemoServer.Fault

        var operation: FetchGreeting { FetchGreeting(url: server.url(for: fault), key: "greeting") }
        /// How many requests reached the server.
        var requests: Int { server.requestCount(for: fault) }
        var entry: SyncLedger.Entry? { get async throws { try await store.ledger.entry(for: "greeting") } }

        @MainActor
        func status(_ policy: CachePolicy = .cacheFirst) throws -> SyncStatus {
            try SyncStatus(refreshing: operation, with: controller, policy: policy)
        }
    }

    func withWorld(_ fault: DemoServer.Fault, date: ManualDate = ManualDate(), _ body: (World) async throws -> Void) async throws {
        try await DemoServer.withRunning { server in
            try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
                let transport = AsyncHTTPClientTransport()
                var configuration = NetworkController.Configuration(baseURL: server.baseURL, transport: transport, environment: .init(date: date.provider))
                configuration.store = store
                let controller = NetworkController(configuration: configuration)
                do {
                    try await body(World(server: server, store: store, controller: controller, date: date, fault: fault))
                } catch {
                    _ = await controller.shutdown(grace: .zero)
                    await transport.shutdown()
                    throw error
                }
                _ = await controller.shutdown(grace: .zero)
                await transport.shutdown()
            }
        }
    }

    @Test func freshWithinMaxAgeAndStaleAfter() async throws {
        try await withWorld(.cacheHeaders("max-age", cacheControl: "max-age=60")) { world in
            let status = try world.status()
            await status.refresh()
            #expect(world.requests == 1)
            #expect(try await world.entry?.freshUntil == world.date.now + 60)

            // Fresh: neither a refresh nor new results ask the server
            world.date.advance(by: 59)
            #expect(status.needsRefresh == false)
            await status.refresh()
            let results = try world.controller.results(for: Item.bySection, refreshing: world.operation, policy: .cacheFirst)
            #expect(results.refreshTask == nil)
            #expect(results.fetchedObjects.map(\.title) == ["hello"])
            #expect(world.requests == 1)

            // Stale once max-age has passed
            world.date.advance(by: 1)
            #expect(status.needsRefresh)
            await status.refresh()
            #expect(world.requests == 2)
        }
    }

    @Test func ageIsSubtracted() async throws {
        try await withWorld(.cacheHeaders("age", cacheControl: "max-age=60", age: 50)) { world in
            let status = try world.status()
            await status.refresh()
            #expect(try await world.entry?.freshUntil == world.date.now + 10)

            world.date.advance(by: 9)
            await status.refresh()
            #expect(world.requests == 1)

            // 60 s of max-age, 50 of them spent before it arrived: stale after 10 s
            world.date.advance(by: 6)
            await status.refresh()
            #expect(world.requests == 2)
        }
    }

    @Test func noCacheRevalidatesAtOnceWithAConditionalRequest() async throws {
        try await withWorld(.cacheHeaders("no-cache", cacheControl: "no-cache, max-age=600")) { world in
            let status = try world.status()
            await status.refresh()
            #expect(try await world.entry?.etag == DemoServer.cacheHeadersETag)

            // Not a second later, still stale: the refresh asks with the ETag, and gets a 304
            #expect(status.needsRefresh)
            await status.refresh()
            #expect(world.requests == 2)
            #expect(world.server.lastRequestHeaders(for: world.fault)?["if-none-match"] == DemoServer.cacheHeadersETag)
            #expect(try await world.controller.perform(world.operation) == .notModified)
            #expect(status.needsRefresh)
        }
    }

    @Test func noStoreIsNeverFreshAndKeepsNoValidators() async throws {
        try await withWorld(.cacheHeaders("no-store", cacheControl: "no-store, max-age=600")) { world in
            let status = try world.status()
            await status.refresh()
            let entry = try #require(try await world.entry)
            #expect(entry.freshUntil == nil)
            #expect(entry.etag == nil)
            // The rows are the app's: written all the same
            #expect(try await world.store.read { db in try Item.fetchCount(db) } == 1)

            // Stale at once, and asked for in full: no validator goes out, a 200 comes back
            #expect(status.needsRefresh)
            await status.refresh()
            #expect(world.requests == 2)
            #expect(world.server.lastRequestHeaders(for: world.fault)?["if-none-match"] == nil)
            #expect(try await world.controller.perform(world.operation) == .updated(1))
        }
    }

    @Test func staleWhileRevalidateServesTheCacheAndRefreshesInTheBackground() async throws {
        try await withWorld(.cacheHeaders("swr", cacheControl: "max-age=60, stale-while-revalidate=30")) { world in
            let status = try world.status()
            await status.refresh()
            #expect(try await world.entry?.staleWhileRevalidateUntil == world.date.now + 90)

            // Stale, within the window: new results show the cached rows at once, and refresh behind them
            world.date.advance(by: 70)
            let results = try world.controller.results(for: Item.bySection, refreshing: world.operation, policy: .cacheFirst)
            #expect(results.fetchedObjects.map(\.title) == ["hello"])
            let refresh = try #require(results.refreshTask)
            await refresh.value
            #expect(world.requests == 2)

            // refresh() starts the refresh and returns before it is over
            world.date.advance(by: 70)
            await status.refresh()
            #expect(status.isSyncing)
            _ = try await Recorder(status.updates()).next { !$0.isSyncing }
            #expect(world.requests == 3)

            // Past the window: refresh() waits for the server
            world.date.advance(by: 91)
            await status.refresh()
            #expect(status.isSyncing == false)
            #expect(world.requests == 4)
        }
    }

    @Test func expiresCountsFromTheServersDateNotTheLocalClock() async throws {
        // The device thinks it is 2001; the server's Date and Expires are today's
        let date = ManualDate(Date(timeIntervalSince1970: 1_000_000_000))
        try await withWorld(.cacheHeaders("expires", expires: .secondsAfterDate(120)), date: date) { world in
            let status = try world.status()
            await status.refresh()
            let freshFor = try #require(try await world.entry?.freshUntil).timeIntervalSince(world.date.now)
            // Date and Expires are whole seconds, and Hummingbird stamps Date
            // from a cache its event loop renews each second, which a loaded
            // machine delays: a few seconds either way. The local clock's
            // answer would be off by 25 years.
            #expect((110...130).contains(freshFor), "\(freshFor)")

            world.date.advance(by: 100)
            await status.refresh()
            #expect(world.requests == 1)
            world.date.advance(by: 30)
            await status.refresh()
            #expect(world.requests == 2)
        }
    }

    @Test func anInvalidExpiresIsAlreadyExpiredAndMaxAgeWinsOverExpires() async throws {
        try await withWorld(.cacheHeaders("bad-expires", expires: .verbatim("0"))) { world in
            let status = try world.status()
            await status.refresh()
            #expect(try await world.entry?.freshUntil == world.date.now)
            #expect(status.needsRefresh)
        }
        try await withWorld(.cacheHeaders("max-age-and-expires", cacheControl: "max-age=60", expires: .secondsAfterDate(3600))) { world in
            let status = try world.status()
            await status.refresh()
            world.date.advance(by: 61)
            await status.refresh()
            #expect(world.requests == 2)
        }
    }

    @Test func a304TakesItsFreshnessFromItsOwnHeaders() async throws {
        try await withWorld(.cacheHeaders("304", cacheControl: "max-age=60")) { world in
            let status = try world.status()
            await status.refresh()
            world.date.advance(by: 61)
            await status.refresh()
            #expect(world.requests == 2)
            #expect(world.server.lastRequestHeaders(for: world.fault)?["if-none-match"] == DemoServer.cacheHeadersETag)
            let entry = try #require(try await world.entry)
            #expect(entry.lastSynced == world.date.now)
            #expect(entry.freshUntil == world.date.now + 60)

            // Fresh again for the 304's max-age
            world.date.advance(by: 59)
            await status.refresh()
            #expect(world.requests == 2)
        }
    }

    @Test func anExplicitMaxAgeWinsOverTheHeaders() async throws {
        try await withWorld(.cacheHeaders("long", cacheControl: "max-age=600")) { world in
            let status = try world.status(.cacheFirst(maxAge: .seconds(30)))
            await status.refresh()
            world.date.advance(by: 31)
            #expect(status.needsRefresh)
            await status.refresh()
            #expect(world.requests == 2)
        }
        try await withWorld(.cacheHeaders("never", cacheControl: "no-store, no-cache")) { world in
            let status = try world.status(.cacheFirst(maxAge: .seconds(300)))
            await status.refresh()
            world.date.advance(by: 10)
            #expect(status.needsRefresh == false)
            await status.refresh()
            #expect(world.requests == 1)
        }
    }

    @Test(arguments: [CachePolicy.cacheFirst, .cacheFirst(maxAge: .seconds(3600))])
    func aSyncStampedInTheFutureIsStale(policy: CachePolicy) async throws {
        try await withWorld(.cacheHeaders("future", cacheControl: "max-age=600")) { world in
            let status = try world.status(policy)
            await status.refresh()
            #expect(status.needsRefresh == false)

            // The clock is set back a minute: the last sync is "in the future"
            world.date.advance(by: -60)
            #expect(status.needsRefresh)
            await status.refresh()
            #expect(world.requests == 2)
        }
    }
}
