import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Observation
import Synchronization
import Testing
@testable import DepotStore

/// The light path: a `Codable` value cached by key, with no table of the
/// app's own, against real store files.
@Suite(.timeLimit(.minutes(1))) @MainActor struct CachedValueTests {
    /// Top songs as depot-server serves them (iTunes' JSON shape).
    struct Chart: Decodable, Sendable {
        struct Label: Decodable, Sendable { var label: String }
        struct Entry: Decodable, Sendable {
            var title: Label
            var artist: Label
        }
        struct Feed: Decodable, Sendable { var entry: [Entry] }
        var feed: Feed

        var songs: [Song] {
            feed.entry.map { Song(name: $0.title.label, artistName: $0.artist.label) }
        }
    }

    struct Song: Codable, Sendable, Equatable {
        var name: String
        var artistName: String
    }

    struct FetchTopSongs: CachedValueOperation {
        var request: NetworkRequest { .get("topsongs/limit=25/json") }
        var cacheTags: Set<String> { ["charts"] }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Song] {
            try response.decode(Chart.self).songs
        }
    }

    /// A profile, served by the fixture transport: its JSON is the value.
    struct Profile: Codable, Sendable, Equatable {
        var name: String
        var tags: [String]
    }

    struct FetchProfile: CachedValueOperation {
        typealias Value = Profile
        var request: NetworkRequest { .get("profile") }
        var cacheKey: String { "profile" }
    }

    /// The next app version's profile: the same key, another shape.
    struct ProfileV2: Codable, Sendable, Equatable {
        var displayName: String
    }

    struct FetchProfileV2: CachedValueOperation {
        typealias Value = ProfileV2
        var request: NetworkRequest { .get("profile/v2") }
        var cacheKey: String { "profile" }
    }

    /// The same shape with another meaning: a raised version.
    struct FetchProfileReread: CachedValueOperation {
        typealias Value = Profile
        static var valueVersion: Int { 2 }
        var request: NetworkRequest { .get("profile") }
        var cacheKey: String { "profile" }
    }

    /// A value that counts how often it is decoded.
    struct Counted: Codable, Sendable, Equatable {
        static let decodes = Atomic<Int>(0)
        var name: String

        init(name: String) { self.name = name }

        init(from decoder: any Decoder) throws {
            Self.decodes.add(1, ordering: .relaxed)
            name = try decoder.singleValueContainer().decode(String.self)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(name)
        }
    }

    struct FetchCounted: CachedValueOperation {
        typealias Value = Counted
        var request: NetworkRequest { .get("counted") }
    }

    /// Adds a tag to the profile, optimistically.
    struct AddTag: Mutation {
        static let typeName = "AddTag"
        var payload: String
        init(payload: String) { self.payload = payload }
        var request: NetworkRequest { .post("profile/tags", json: ["tag": payload]) }
        func applyOptimistically(_ db: Database) throws {
            try FetchProfile().modifyCachedValue(in: db) { $0.tags.append(payload) }
        }
        func commit(_ response: NetworkResponse, _ db: Database) throws {
            try FetchProfile().writeCachedValue(response.decode(Profile.self), to: db)
        }
        func rollback(_ error: DepotError, _ db: Database) throws {
            try FetchProfile().revertCachedValue(in: db)
        }
    }

    struct Setup {
        let folder: URL
        let date = ManualDate()
        var path: String { folder.appending(path: "cache.sqlite").path }

        func store(retention: Retention? = nil) throws -> Store {
            try Store(path: path, retention: retention, environment: .init(date: date.provider))
        }

        func controller(_ transport: any Transport, baseURL: URL = URL(string: "http://fixture.test")!, store: Store) -> NetworkController {
            var configuration = NetworkController.Configuration(baseURL: baseURL, transport: transport, observability: .init(notificationCenter: nil))
            configuration.store = store
            configuration.environment = .init(date: date.provider)
            return NetworkController(configuration: configuration)
        }
    }

    func withSetup<T>(_ body: (Setup) async throws -> T) async throws -> T {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        return try await body(Setup(folder: folder))
    }

    static func json<T: Encodable>(_ value: T) throws -> FixtureTransport.Fixture {
        .data(try JSONEncoder().encode(value), headers: ["Content-Type": "application/json"])
    }

    /// The next value `updates` delivers that `predicate` accepts.
    static func next<Value: Sendable>(_ updates: Recorder<Value?>, where predicate: @escaping @Sendable (Value?) -> Bool) async throws -> Value? {
        try await updates.next(where: predicate)
    }

    // MARK: - Fetch, cache, show

    @Test func aValueIsFetchedCachedAndShownWithNoTableOfTheAppsOwn() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let songs = try controller.value(for: FetchTopSongs())
                #expect(songs.value == nil, "nothing before the first sync")
                // A real server over loopback: on a loaded two-core machine the
                // first exchange can take longer than the Recorder's 10 s guard.
                let updates = Recorder(songs.updates(), timeout: .seconds(45))
                let shown = try await updates.next { ($0?.count ?? 0) == 25 }
                #expect(shown?.first?.name.isEmpty == false)
                #expect(songs.syncStatus.lastSynced != nil)
                // One row in Depot's own table, under the operation's key, with its type.
                let rows = try await store.read { db in
                    try Row.fetchAll(db, sql: "SELECT key, type, version FROM depot_values").map { [$0["key"], $0["type"], String($0["version"] as Int)] as [String] }
                }
                #expect(rows == [[FetchTopSongs().cacheKey, String(reflecting: [Song].self), "1"]])

                // A second sync: the server's ETag makes it a 304, the value stays.
                let second = try await controller.perform(FetchTopSongs())
                #expect(second.written == nil, "a 304")
                #expect(songs.value?.count == 25)
                _ = await controller.shutdown(grace: .zero)
                try await store.close()

                // A cold start offline shows the last value at once.
                let reopened = try setup.store()
                let offline = FixtureTransport()
                offline.isOffline = true
                let coldController = setup.controller(offline, store: reopened)
                let cold = try coldController.value(for: FetchTopSongs(), policy: .cacheOnly)
                #expect(cold.value == shown)
                #expect(cold.syncStatus.lastSynced != nil)
                _ = await coldController.shutdown(grace: .zero)
                try await reopened.close()
            }
        }
    }

    @Test func aCachedValueIsDecodedOnceOnItsWayToTheScreen() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            try await store.write { db in try FetchCounted().writeCachedValue(Counted(name: "Ann"), to: db) }
            let controller = setup.controller(FixtureTransport(), store: store)
            let before = Counted.decodes.load(ordering: .relaxed)
            let counted = try controller.value(for: FetchCounted(), policy: .cacheOnly)
            #expect(counted.value == Counted(name: "Ann"))
            await store.settled()
            // Once for the screen, and once in observation's first round (off
            // the main actor), which looks for a commit made meanwhile. A
            // second decode on the main actor doubled a cold start's wait.
            #expect(Counted.decodes.load(ordering: .relaxed) - before <= 2)
            _ = await controller.shutdown(grace: .zero)
        }
    }

    @Test func theStoredTypeNameIsWhatStringReflectingPrints() {
        // Values cached by earlier versions were stored under `String(reflecting:)`.
        struct Local: Codable {}
        #expect(ValueTable.typeName([Song].self) == String(reflecting: [Song].self))
        #expect(ValueTable.typeName(Profile?.self) == String(reflecting: Profile?.self))
        #expect(ValueTable.typeName([String: [Int]].self) == String(reflecting: [String: [Int]].self))
        #expect(ValueTable.typeName([Local].self) == String(reflecting: [Local].self))
        #expect(ValueTable.typeName([Song].self) == "Swift.Array<DepotStoreTests.CachedValueTests.Song>")
    }

    @Test func theThreeWaysOfFollowingAValueSeeEachWrite() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let transport = FixtureTransport(["/profile": try Self.json(Profile(name: "Ann", tags: []))])
            let controller = setup.controller(transport, store: store)
            let profile = try controller.value(for: FetchProfile(), policy: .cacheOnly)

            let called = Mutex<[Profile?]>([])
            let observation = profile.start { value in called.withLock { $0.append(value) } }
            let updates = Recorder(profile.updates())
            let observed = Mutex(false)
            withObservationTracking { _ = profile.value } onChange: { observed.withLock { $0 = true } }

            _ = try await controller.perform(FetchProfile())
            let ann = Profile(name: "Ann", tags: [])
            #expect(try await updates.next { $0 == ann } == ann)
            #expect(observed.withLock { $0 })
            #expect(called.withLock { $0 } == [nil, ann])

            // After cancel() returns, no call.
            observation.cancel()
            try await store.write { db in try FetchProfile().writeCachedValue(Profile(name: "Bo", tags: []), to: db) }
            #expect(try await updates.next { $0?.name == "Bo" }?.name == "Bo")
            #expect(called.withLock { $0 } == [nil, ann])
            _ = await controller.shutdown(grace: .zero)
        }
    }

    // MARK: - Invalidation and retention

    @Test func invalidationByKeyPrefixOrTagRefetchesTheValue() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let songs = try controller.value(for: FetchTopSongs(), policy: .cacheFirst(maxAge: .seconds(3_600)))
                let states = Recorder(songs.syncStatus.updates(), timeout: .seconds(45))
                _ = try await states.next { $0.lastSynced != nil && !$0.isSyncing }
                let firstSync = try #require(songs.syncStatus.lastSynced)
                for target in [CacheInvalidation.key(FetchTopSongs().cacheKey), .keyPrefix("GET topsongs"), .tag("charts")] {
                    setup.date.advance(by: 1)
                    let before = try #require(songs.syncStatus.lastSynced)
                    #expect(try await store.ledger.invalidate(target) == 1)
                    _ = try await states.next { ($0.lastSynced ?? .distantPast) > before && !$0.isSyncing }
                }
                #expect(try #require(songs.syncStatus.lastSynced) > firstSync)
                _ = await controller.shutdown(grace: .zero)
            }
        }
    }

    @Test func anEvictedValueGoesAndIsFetchedAgain() async throws {
        try await withSetup { setup in
            let retention = Retention(policies: [.cachedValues(keeping: [.maxAge(.seconds(3_600), by: "updatedAt")])])
            let store = try setup.store(retention: retention)
            await store.evictionIdle()
            let transport = FixtureTransport(["/profile": try Self.json(Profile(name: "Ann", tags: []))])
            let controller = setup.controller(transport, store: store)
            let profile = try controller.value(for: FetchProfile(), policy: .cacheFirst(maxAge: .seconds(86_400)))
            let updates = Recorder(profile.updates())
            _ = try await updates.next { $0?.name == "Ann" }
            let requests = transport.requests.count

            transport.respond(to: "/profile", with: try Self.json(Profile(name: "Ann again", tags: [])))
            setup.date.advance(by: 7_200)
            let report = try await store.evict()
            #expect(report.rowsEvicted["depot_values"] == 1)
            // Gone, then fetched again although the policy's day has not passed.
            _ = try await updates.next { $0 == nil }
            #expect(try await updates.next { $0 != nil }?.name == "Ann again")
            #expect(transport.requests.count == requests + 1)
            _ = await controller.shutdown(grace: .zero)
        }
    }

    /// One of many values, each under a key of its own.
    struct FetchBlob: CachedValueOperation {
        typealias Value = [String]
        var number: Int
        var request: NetworkRequest { .get("blob/\(number)") }
        var cacheKey: String { "blob-\(number)" }
    }

    @Test func aSizeBudgetEvictsTheOldestValues() async throws {
        try await withSetup { setup in
            let budget = 400_000
            // Values are few and large: a batch of one, or the first batch takes them all.
            let retention = Retention(
                policies: [.cachedValues(keeping: [.maxAge(.seconds(365 * 86_400), by: "updatedAt")])],
                sizeBudget: budget, batchSize: 1)
            let store = try setup.store(retention: retention)
            await store.evictionIdle()
            let transport = FixtureTransport()
            transport.respondToOtherPaths(with: try Self.json(Array(repeating: String(repeating: "v", count: 1_000), count: 60)))
            let controller = setup.controller(transport, store: store)
            // Twelve values of 60 KB, value i synced i hours after the first.
            for number in 0..<12 {
                _ = try await controller.perform(FetchBlob(number: number))
                setup.date.advance(by: 3_600)
            }
            await store.evictionIdle()
            let report = try await store.evict()
            let kept = try await store.read { db in try String.fetchAll(db, sql: "SELECT key FROM depot_values ORDER BY updatedAt") }
            #expect(try await store.read(Evictor.usedBytes) <= budget)
            #expect(kept.last == "blob-11", "the newest stays")
            #expect(!kept.contains("blob-0"), "the oldest goes")
            #expect(kept.count < 12 && kept.count > 1, "\(kept), \(report)")
            _ = await controller.shutdown(grace: .zero)
        }
    }

    // MARK: - Schema evolution

    /// A store holding a `Profile`, and a controller whose server answers
    /// `/profile/v2` with a `ProfileV2`: the next app version's first launch.
    static func profileCachedByAnEarlierVersion(_ setup: Setup) async throws -> (Store, FixtureTransport, NetworkController) {
        let store = try setup.store()
        let transport = FixtureTransport([
            "/profile": try json(Profile(name: "Ann", tags: ["a"])),
            "/profile/v2": try json(ProfileV2(displayName: "Ann B.")),
        ])
        let controller = setup.controller(transport, store: store)
        _ = try await controller.perform(FetchProfile())
        return (store, transport, controller)
    }

    @Test func aStoredValueThatNoLongerDecodesIsAMissAndIsRefetched() async throws {
        try await withSetup { setup in
            let (store, transport, controller) = try await Self.profileCachedByAnEarlierVersion(setup)

            // The next app version: the stored Profile is no ProfileV2.
            let v2 = try controller.value(for: FetchProfileV2(), policy: .cacheFirst(maxAge: .seconds(86_400)))
            #expect(v2.value == nil)
            #expect(v2.error?.code == .decoding)
            let updates = Recorder(v2.updates())
            #expect(try await updates.next { $0 != nil } == ProfileV2(displayName: "Ann B."))
            #expect(v2.error == nil)
            #expect(transport.requests.map(\.url.path) == ["/profile", "/profile/v2"])

            // A raised version: the same shape, read as a miss too.
            let reread = try controller.value(for: FetchProfileReread(), policy: .cacheOnly)
            #expect(reread.value == nil)
            #expect(reread.error?.code == .decoding)
            #expect(try await store.read { db in try FetchProfile().cachedValue(in: db) } == nil)
            _ = await controller.shutdown(grace: .zero)
        }
    }

    /// A value that no longer decodes is marked stale without waiting for
    /// the writer: `value(for:)` returns on the main actor while another
    /// write holds the store (a big sync, say). The status is stale at once,
    /// and a refresh asked for before the mark is written still fetches
    /// once. (The mark was a write on the main actor, which waited.)
    @Test(arguments: [CachePolicy.cacheThenNetwork, .cacheFirst(maxAge: .seconds(86_400))])
    func aMissIsMarkedStaleWithoutWaitingForTheWriter(policy: CachePolicy) async throws {
        try await withSetup { setup in
            let (store, transport, controller) = try await Self.profileCachedByAnEarlierVersion(setup)

            // A write holds the writer until released (or 20 s, so that a
            // failing run does not hang).
            let release = DispatchSemaphore(value: 0)
            let ended = Counter()
            let (entered, enter) = AsyncStream.makeStream(of: Void.self)
            let holding = Task {
                try await store.write { db in
                    try db.execute(sql: "CREATE TABLE IF NOT EXISTS busy (x)")
                    enter.yield()
                    _ = release.wait(timeout: .now() + 20)
                    ended.increment()
                }
            }
            for await _ in entered { break }

            let v2 = try controller.value(for: FetchProfileV2(), policy: policy)
            #expect(ended.value == 0, "value(for:) waited for the write to end")
            #expect(v2.value == nil)
            #expect(v2.error?.code == .decoding)
            #expect(v2.syncStatus.isStale)
            #expect(v2.syncStatus.needsRefresh)
            // A pull to refresh before the mark is written joins the refetch.
            let pulled = Task { await v2.syncStatus.refresh() }
            release.signal()
            try await holding.value
            await pulled.value

            try await observed { v2.value != nil && !v2.syncStatus.isSyncing && !v2.syncStatus.isStale }
            #expect(v2.value == ProfileV2(displayName: "Ann B."))
            _ = await controller.shutdown(grace: .zero)
            #expect(transport.requests.map(\.url.path) == ["/profile", "/profile/v2"])
        }
    }

    // MARK: - Optimistic writes

    @Test func anOptimisticChangeShowsStaysOnTopOfRefreshesAndCommits() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let transport = FixtureTransport(["/profile": try Self.json(Profile(name: "Ann", tags: ["a"]))])
            let controller = setup.controller(transport, store: store)
            let profile = try controller.value(for: FetchProfile(), policy: .cacheOnly)
            let updates = Recorder(profile.updates())
            _ = try await controller.perform(FetchProfile())

            transport.isOffline = true
            let outbox = Outbox(store: store, controller: controller, types: [AddTag.self], waitsForNetwork: false)
            let ticket = try await outbox.send(AddTag(payload: "b"))
            #expect(try await updates.next { $0?.tags == ["a", "b"] }?.tags == ["a", "b"])
            // Its attempt found no network: queued, its lane stopped.
            await outbox.waitUntilIdle()
            #expect(try await outbox.snapshot().pendingCount == 1)

            // A refresh brings the server's value; the pending tag goes on top.
            transport.isOffline = false
            transport.respond(to: "/profile", with: try Self.json(Profile(name: "Ann Lee", tags: ["a"])))
            transport.respond(to: "/profile/tags", with: try Self.json(Profile(name: "Ann Lee", tags: ["a", "b"])))
            _ = try await controller.perform(FetchProfile())
            #expect(try await store.read { db in try FetchProfile().cachedValue(in: db) } == Profile(name: "Ann Lee", tags: ["a", "b"]))

            // Sent: the server's answer is the value, with nothing kept beside it.
            try await outbox.start()
            #expect(try await ticket.outcome().get().status == 200)
            #expect(try await store.read { db in try Data.fetchOne(db, sql: "SELECT server FROM depot_values") } == nil)
            // The commits reach the live value on the main actor a moment later.
            await store.settled()
            #expect(profile.value == Profile(name: "Ann Lee", tags: ["a", "b"]))
            _ = await controller.shutdown(grace: .zero)
        }
    }

    @Test func aRefusedChangeRollsTheValueBackToTheServersAndRefetches() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let transport = FixtureTransport([
                "/profile": try Self.json(Profile(name: "Ann", tags: ["a"])),
                "/profile/tags": .status(422),
            ])
            let controller = setup.controller(transport, store: store)
            let profile = try controller.value(for: FetchProfile(), policy: .cacheFirst(maxAge: .seconds(86_400)))
            let updates = Recorder(profile.updates())
            _ = try await updates.next { $0?.tags == ["a"] }
            let states = Recorder(profile.syncStatus.updates())
            let firstSync = try #require(try await states.next { !$0.isSyncing && $0.lastSynced != nil }.lastSynced)
            setup.date.advance(by: 1)

            let outbox = Outbox(store: store, controller: controller, types: [AddTag.self])
            let ticket = try await outbox.send(AddTag(payload: "b"))
            guard case .failure(let refusal) = await ticket.outcome() else {
                Issue.record("the server refused the tag: the send must fail")
                return
            }
            #expect(refusal.status == 422)
            // Rolled back to the server's value, and fetched again once, though
            // the policy's day has not passed.
            _ = try await updates.next { $0?.tags == ["a"] }
            _ = try await states.next { !$0.isSyncing && ($0.lastSynced ?? .distantPast) > firstSync }
            #expect(transport.requests.filter { $0.url.path == "/profile" }.count == 2)
            #expect(try await store.read { db in try Data.fetchOne(db, sql: "SELECT server FROM depot_values") } == nil)
            _ = await controller.shutdown(grace: .zero)
        }
    }
}
