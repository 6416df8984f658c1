import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// Live data on a value: a `ChangeFeed` whose changes replace a cached
/// value, on `NetworkSimulator`'s scripted stream and a `ManualClock`.
extension CachedValueTests {
    /// The profile as a change feed: the full sync is the profile, and each
    /// `profile` event the profile as it is now, written over the cached value.
    struct ProfileFeed: ChangeFeed {
        /// A page of catch-up: the profile's versions since the cursor.
        struct Page: Decodable {
            var changes: [Profile]
            var cursor: String
            var more: Bool
        }

        var syncKey: String { "profile:feed" }
        var snapshotRequest: NetworkRequest { .get("profile") }
        var eventsRequest: NetworkRequest? { .get("profile/events") }

        func changesRequest(after cursor: String) -> NetworkRequest {
            .get("profile/changes", query: ["since": cursor])
        }

        func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<Profile> {
            let page = try response.decode(Page.self)
            return ChangePage(page.changes, cursor: page.cursor, more: page.more)
        }

        func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<Profile> {
            guard let cursor = response.headers["Change-Cursor"] else {
                throw DepotError(.decoding, status: response.status, detail: "GET /profile sent no Change-Cursor header")
            }
            return ChangePage([try response.decode(Profile.self)], cursor: cursor)
        }

        func apply(_ profile: Profile, to db: Database) throws {
            try FetchProfile().writeCachedValue(profile, to: db)
        }

        func removeAll(from db: Database) throws {
            // Nothing to clear: the full sync's one change replaces the value whole.
        }

        func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<Profile> {
            guard event.type == "profile" else { return .ignore }
            return .changes([try JSONDecoder().decode(Profile.self, from: Data(event.data.utf8))])
        }
    }

    @Test func aChangeFeedThatReplacesAValueShowsInItsLiveValue() async throws {
        let ann = Profile(name: "Ann", tags: [])
        let annLee = Profile(name: "Ann Lee", tags: ["a"])
        let event = "id: 1\nevent: profile\ndata: " + String(decoding: try JSONEncoder().encode(annLee), as: UTF8.self) + "\n\n"
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 10_000_000, rtt: .milliseconds(50)), routes: [
            .init(path: "/profile/events", stream: { _ in .init(steps: [.send(event, after: .seconds(1))]) }),
            .init(path: "/profile", body: try JSONEncoder().encode(ann), headers: ["Change-Cursor": "0", "Content-Type": "application/json"]),
        ])
        let environment = DepotEnvironment(clock: clock, seed: 1)
        let store = try Store.inMemory(environment: environment)
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://profile.test")!, transport: simulator, observability: .init(notificationCenter: nil), environment: environment)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)

        // Given the profile on screen, which only the feed fetches
        let profile = try controller.value(for: FetchProfile(), policy: .cacheOnly)
        #expect(profile.value == nil)
        let updates = Recorder(profile.updates())

        // When the feed syncs it in full, and the stream then brings a new profile
        let feed = try LiveFeed(ProfileFeed(), controller: controller)
        let watch = feed.watch()
        let cached: @Sendable () -> Profile? = { try? store.writer.read { db in try FetchProfile().cachedValue(in: db) } }
        let controllerSettled = simulator.settled(with: controller)
        try await simulator.run(until: { cached() == annLee }, quietYields: 64, settled: { controllerSettled() && feed.isParked })

        // Then the live value shows the event's profile, and the cursor moved with it
        #expect(try await updates.next { $0 == annLee } == annLee)
        #expect(profile.value == annLee)
        #expect(profile.error == nil)
        #expect(try await store.read { db in try SyncLedger.cursor(for: "profile:feed", in: db) } == "1")
        // The value was written as the server's: nothing kept beside it.
        #expect(try await store.read { db in try Data.fetchOne(db, sql: "SELECT server FROM depot_values WHERE key = 'profile'") } == nil)
        watch.cancel()
        _ = await controller.shutdown(grace: .zero)
    }
}
