import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

@Suite(.timeLimit(.minutes(1)))
@MainActor
struct SyncStatusTests {
    let base = URL(string: "http://fixtures.test")!
    var fetch: FetchItems { FetchItems(url: base.appending(path: "items")) }

    func controller(_ transport: FixtureTransport, store: Store, clock: any Clock<Duration> = ContinuousClock()) -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: base, transport: transport, environment: .init(clock: clock))
        configuration.store = store
        return NetworkController(configuration: configuration)
    }

    func seed(_ store: Store, items: Int, syncedAt date: Date) async throws {
        try await store.write { db in
            for item in makeItems(items) { try item.insert(db) }
            try SyncLedger.recordSuccess(for: "items", at: date, validators: nil, in: db)
        }
    }

    @Test func coldStartWithoutNetworkStillSaysWhenItLastSynced() async throws {
        let date = ManualDate()
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        // Given a previous run that synced and quit
        do {
            let store = try Store(path: path, migrator: Item.migrator, environment: .init(date: date.provider))
            try await seed(store, items: 3, syncedAt: date.now)
            try await store.close()
        }
        date.advance(by: 3600)

        // When the app starts again offline, with a brand-new store and controller
        let store = try Store(path: path, migrator: Item.migrator, environment: .init(date: date.provider))
        let transport = FixtureTransport()
        transport.isOffline = true
        let results = try controller(transport, store: store).results(for: Item.bySection, refreshing: fetch, policy: .cacheOnly)

        // Then the rows and "last synced an hour ago" are there at once, from the database
        #expect(results.fetchedObjects.count == 3)
        #expect(results.syncStatus?.lastSynced == date.now.addingTimeInterval(-3600))
        #expect(results.refreshTask == nil, "cache-only results start no refresh")
        #expect(transport.requests.isEmpty)
    }

    /// A live status follows its ledger entry, also when the entry goes.
    @Test func aLedgerResetShowsOnALiveStatus() async throws {
        let date = ManualDate()
        let store = try Store.inMemory(migrator: Item.migrator, environment: .init(date: date.provider))
        try await seed(store, items: 3, syncedAt: date.now)
        let results = try controller(FixtureTransport(), store: store).results(for: Item.bySection, refreshing: fetch, policy: .cacheOnly)
        let status = try #require(results.syncStatus)
        #expect(status.lastSynced == date.now)

        try await store.ledger.reset("items")
        await store.fanout.settled()

        #expect(status.lastSynced == nil, "the entry is gone: never synced")
    }

    @Test func cacheThenNetworkShowsTheCacheThenTheFreshRows() async throws {
        let date = ManualDate()
        let store = try Store.inMemory(migrator: Item.migrator, environment: .init(date: date.provider))
        try await seed(store, items: 2, syncedAt: date.now)
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(5, titlePrefix: "fresh")))])
        date.advance(by: 10)

        let results = try controller(transport, store: store).results(for: Item.bySection, refreshing: fetch)
        #expect(results.fetchedObjects.map(\.title) == ["item 0", "item 1"])

        for await update in results.updates() where update.snapshot.count == 5 { break }
        #expect(results.fetchedObjects.allSatisfy { $0.title.hasPrefix("fresh") })
        let status = try #require(results.syncStatus)
        await status.refresh()
        #expect(status.lastSynced == date.now)
        #expect(status.lastError == nil)
        #expect(status.isSyncing == false)
    }

    @Test func offlineKeepsTheRowsAndPutsTheErrorInTheStatus() async throws {
        let date = ManualDate()
        let store = try Store.inMemory(migrator: Item.migrator, environment: .init(date: date.provider))
        try await seed(store, items: 4, syncedAt: date.now)
        let transport = FixtureTransport()
        transport.isOffline = true

        let results = try controller(transport, store: store).results(for: Item.bySection, refreshing: fetch)
        let status = try #require(results.syncStatus)
        for await state in status.updates() where state.lastError != nil { break }

        #expect(status.lastError?.code == .offline)
        #expect(status.lastSynced == date.now)
        #expect(results.fetchedObjects.count == 4)
        #expect(try await store.ledger.entry(for: "items")?.lastError?.code == .offline)
        // The refresh waits for the network rather than failing.
        #expect(status.isSyncing)
        #expect(results.syncStatus?.isSyncing == true)
    }

    @Test func cacheFirstGoesToTheNetworkOnlyWhenTooOld() async throws {
        let date = ManualDate()
        let store = try Store.inMemory(migrator: Item.migrator, environment: .init(date: date.provider))
        try await seed(store, items: 1, syncedAt: date.now)
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(2)))])
        let controller = controller(transport, store: store)
        let policy = CachePolicy.cacheFirst(maxAge: .seconds(300))

        date.advance(by: 299)
        let fresh = try controller.results(for: Item.bySection, refreshing: fetch, policy: policy)
        #expect(fresh.refreshTask == nil, "a cache younger than maxAge starts no refresh")
        #expect(fresh.syncStatus?.isSyncing == false)
        #expect(transport.requests.isEmpty)

        date.advance(by: 2)
        let stale = try controller.results(for: Item.bySection, refreshing: fetch, policy: policy)
        let refresh = try #require(stale.refreshTask, "an older cache starts a refresh")
        await refresh.value
        for await update in stale.updates() where update.snapshot.count == 2 { break }
        #expect(transport.requests.count == 1)
    }

    @Test func cacheOnlyNeverGoesToTheNetwork() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(2)))])
        let results = try controller(transport, store: store).results(for: Item.bySection, refreshing: fetch, policy: .cacheOnly)
        #expect(results.fetchedObjects.isEmpty)
        #expect(results.syncStatus?.lastSynced == nil)
        #expect(results.refreshTask == nil, "not even an empty cache makes cache-only results refresh")
        #expect(transport.requests.isEmpty)
    }

    @Test func networkOnlyShowsNothingUntilTheNetworkAnswered() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await seed(store, items: 3, syncedAt: Date(timeIntervalSince1970: 0))
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(6)))])

        let results = try controller(transport, store: store).results(for: Item.bySection, refreshing: fetch, policy: .networkOnly)
        #expect(results.fetchedObjects.isEmpty)
        for await update in results.updates() where update.snapshot.count == 6 { break }
        #expect(results.fetchedObjects.count == 6)

        // And when the network fails, it stays empty with the error in the status.
        transport.isOffline = true
        let failing = try controller(transport, store: store).results(for: Item.bySection, refreshing: fetch, policy: .networkOnly)
        let status = try #require(failing.syncStatus)
        for await state in status.updates() where state.lastError != nil { break }
        #expect(status.isSyncing, "offline, the refresh waits for the network")
        #expect(failing.fetchedObjects.isEmpty)
    }

    @Test func networkOnlyShowsTheRowsWhenALaterRefreshSucceeds() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        try await seed(store, items: 3, syncedAt: Date(timeIntervalSince1970: 0))
        let transport = FixtureTransport(["/items": .status(404)])

        // Given network-only results whose first refresh failed
        let results = try controller(transport, store: store).results(for: Item.bySection, refreshing: fetch, policy: .networkOnly)
        await results.refreshTask?.value
        #expect(results.syncStatus?.lastError?.code == .notFound)
        #expect(results.fetchedObjects.isEmpty)

        // When a later refresh succeeds, the rows show
        transport.respond(to: "/items", with: .data(try jsonData(makeItems(6))))
        await results.syncStatus?.refresh()
        for await update in results.updates() where update.snapshot.count == 6 { break }
        #expect(results.fetchedObjects.count == 6)
    }

    @Test func autoRefreshRunsOnTheControllersClock() async throws {
        let clock = ManualClock()
        let store = try Store.inMemory(migrator: Item.migrator)
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(2)))])
        // A timeout far beyond the test keeps the controller's deadline watch from
        // waking in between: the only sleeper that matters is the auto-refresh.
        var fetch = fetch
        fetch.timeout = .idle(.seconds(1_000_000))
        let status = try SyncStatus(refreshing: fetch, with: controller(transport, store: store, clock: clock))

        status.autoRefresh(every: .seconds(60))
        for expected in 1...3 {
            // The auto-refresh loop, plus the deadline watch once a refresh has run.
            await clock.sleepers(atLeast: expected == 1 ? 1 : 2)
            clock.advance(by: .seconds(60))
            for await state in status.updates() where state.lastSynced != nil && status.refreshCount == expected { break }
            #expect(transport.requests.count == expected)
        }
        status.stopAutoRefresh()
        #expect(status.lastSynced != nil)
    }

    @Test func refreshesWhenTheNetworkComesBack() async throws {
        // Given an auto-refreshing status that synced once
        let clock = ManualClock()
        let store = try Store.inMemory(migrator: Item.migrator)
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(3))), "/other": .data(Data("{}".utf8))])
        let controller = controller(transport, store: store, clock: clock)
        var fetch = fetch
        fetch.timeout = .idle(.seconds(1_000_000))
        let status = try SyncStatus(refreshing: fetch, with: controller)
        status.autoRefresh(every: .seconds(3600))
        await status.refresh()
        #expect(itemRequests(transport) == 1)

        // When another request finds no network, then the network returns and a
        // waiting request gets through on the controller's next probe
        transport.isOffline = true
        let failure = await depotError { _ = try await controller.perform(Other(offlineBehavior: .failFast)) }
        #expect(failure?.code == .offline)
        #expect(controller.quality == .offline)
        transport.isOffline = false
        let events = Recorder(controller.events())
        let waiting = controller.enqueue(Other(offlineBehavior: .waitForConnectivity))
        await clock.sleepers(atLeast: 2)   // the probe loop and the hourly timer
        clock.advance(by: .seconds(1))
        _ = try await events.next { $0.ticket == waiting.id && $0.kind.isTerminal }

        // Then the status refreshes on its own, without waiting for the hour
        for await _ in status.updates() where itemRequests(transport) == 2 && !status.isSyncing { break }
        #expect(itemRequests(transport) == 2)
        #expect(status.lastError == nil)
    }

    struct Other: NetworkOperation {
        typealias Output = NetworkResponse
        var offlineBehavior: OfflineBehavior
        var request: NetworkRequest { .get("other") }
    }

    func itemRequests(_ transport: FixtureTransport) -> Int {
        transport.requests.filter { $0.url.path == "/items" }.count
    }

    /// Runs `body` and returns its DepotError, if any.
    func depotError(_ body: () async throws -> Void) async -> DepotError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? DepotError
        }
    }

    @Test func updatesReportSyncingThenDone() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(2)))])
        let status = try SyncStatus(refreshing: fetch, with: controller(transport, store: store))
        var states: [SyncStatus.State] = []
        let stream = status.updates()
        let refresh = Task { await status.refresh() }
        for await state in stream {
            states.append(state)
            if state.lastSynced != nil && !state.isSyncing { break }
        }
        await refresh.value
        #expect(states.first?.isSyncing == false)
        #expect(states.contains { $0.isSyncing })
        #expect(states.last?.isSyncing == false)
    }

    @Test func refreshWhileRefreshingJoinsTheRunningOne() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(2)))])
        let status = try SyncStatus(refreshing: fetch, with: controller(transport, store: store))
        async let first: Void = status.refresh()
        async let second: Void = status.refresh()
        _ = await (first, second)
        #expect(transport.requests.count == 1)
    }
}

extension SyncStatusTests {
    /// Another process holds the cache's lock: the sync's write fails, and so
    /// does recording the failure in the ledger. The status says so all the
    /// same, with the storage problem, instead of the last good sync.
    @Test func aFailureTheLedgerCannotRecordStillShows() async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "cache.sqlite").path
        let store = try Store(path: path, migrator: Item.migrator, configuration: StorageProblemTests.busyTimeout(0.05))
        try await seed(store, items: 3, syncedAt: Date(timeIntervalSince1970: 0))
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(6)))])
        let status = try SyncStatus(refreshing: fetch, with: controller(transport, store: store))
        #expect(status.lastError == nil)

        // Given another connection that holds the write lock
        var holderConfiguration = Configuration()
        holderConfiguration.allowsUnsafeTransactions = true
        let holder = try DatabaseQueue(path: path, configuration: holderConfiguration)
        try await holder.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }

        // When a refresh fetches and cannot write
        await status.refresh(force: true)

        // Then the status tells the failure, as a storage problem
        #expect(status.lastError?.code == .storage)
        #expect(status.lastError?.storageProblem == .locked)
        #expect(status.lastSynced == Date(timeIntervalSince1970: 0))

        // And once the lock is gone, the next refresh clears it
        try await holder.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
        await status.refresh(force: true)
        #expect(status.lastError == nil)
    }
}
