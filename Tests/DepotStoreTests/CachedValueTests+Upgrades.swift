import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// A new app version meets what the last one cached: a value of another
/// shape, or a key the table path synced. The server's validators are kept
/// per URL, so a conditional request would be answered with a 304 that
/// confirms a value the cache does not hold.
extension CachedValueTests {
    /// The next version's song: the same URL and key, another shape.
    struct SongV2: Codable, Sendable, Equatable {
        var title: String
        var artist: String
    }

    struct FetchTopSongsV2: CachedValueOperation {
        var request: NetworkRequest { .get("topsongs/limit=25/json") }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [SongV2] {
            try response.decode(Chart.self).songs.map { SongV2(title: $0.name, artist: $0.artistName) }
        }
    }

    /// The same endpoint on the table path: rows of the app's own (none
    /// here), and a ledger entry with the server's validators.
    struct FetchTopSongsIntoATable: CachingOperation {
        var request: NetworkRequest { .get("topsongs/limit=25/json") }

        func write(_ response: NetworkResponse, to db: Database) throws {}
    }

    @Test func aValueThatNoLongerDecodesIsFetchedWholeNotConfirmedByA304() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                // Given songs cached by this version, with the server's ETag
                _ = try await controller.perform(FetchTopSongs())
                #expect(FetchTopSongsV2().cacheKey == FetchTopSongs().cacheKey)

                // When the next version, whose songs have another shape, shows them
                let songs = try controller.value(for: FetchTopSongsV2(), policy: .cacheFirst(maxAge: .seconds(3_600)))
                #expect(songs.value == nil)
                let states = Recorder(songs.syncStatus.updates())
                _ = try await states.next { $0.isSyncing }
                _ = try await states.next { !$0.isSyncing }
                await store.settled()

                // Then they are fetched without validators, and shown
                #expect(songs.syncStatus.lastError == nil)
                #expect(server.currentStats.notModified == 0, "a 304 would confirm the old shape")
                #expect(songs.value?.count == 25)
                #expect(songs.error == nil)
                _ = await controller.shutdown(grace: .zero)
            }
        }
    }

    /// A value an earlier version of Depot stored as JSON shows as before,
    /// offline too; the next sync stores it in `ValueFormat`.
    @Test func aValueStoredAsJSONByAnEarlierDepotStillShows() async throws {
        try await withSetup { setup in
            let (store, transport, controller) = try await Self.profileCachedByAnEarlierVersion(setup)
            let profile = Profile(name: "Ann", tags: ["a"])
            let stored = { try await store.read { db in try Data.fetchOne(db, sql: "SELECT value FROM depot_values WHERE key = ?", arguments: [FetchProfile().cacheKey]) } }
            #expect(try await stored()?.first == ValueFormat.marker)
            // As the earlier version wrote it.
            try await store.write { db in
                try db.execute(sql: "UPDATE depot_values SET value = ? WHERE key = ?", arguments: [try JSONEncoder().encode(profile), FetchProfile().cacheKey])
            }
            let shown = try controller.value(for: FetchProfile(), policy: .cacheOnly)
            #expect(shown.value == profile)
            #expect(shown.error == nil)

            _ = try await controller.perform(FetchProfile())
            #expect(try await stored()?.first == ValueFormat.marker)
            #expect(transport.requests.map(\.url.path) == ["/profile", "/profile"])
            _ = await controller.shutdown(grace: .zero)
        }
    }

    @Test func aKeyTheTablePathSyncedShowsItsValueAfterTheUpgrade() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                // Given the endpoint synced a moment ago by the table path: no value, a fresh ledger entry
                _ = try await controller.perform(FetchTopSongsIntoATable())
                #expect(FetchTopSongsIntoATable().cacheKey == FetchTopSongs().cacheKey)

                // When the light path shows it, with a policy the entry's age satisfies
                let songs = try controller.value(for: FetchTopSongs(), policy: .cacheFirst(maxAge: .seconds(3_600)))
                #expect(songs.value == nil)
                let updates = Recorder(songs.updates())

                // Then the key is a miss: fetched at once, whole, and shown
                #expect(try await updates.next { $0 != nil }?.count == 25)
                #expect(server.currentStats.notModified == 0, "a 304 would confirm a value the cache does not hold")
                _ = await controller.shutdown(grace: .zero)
            }
        }
    }
}
