import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing

@Suite @MainActor struct NetworkControllerResultsTests {
    /// Results need the cache: a controller made without a store says so in
    /// one sentence that names what to set, instead of showing nothing.
    @Test func resultsOnAControllerWithoutAStoreNameTheMissingStore() async throws {
        let controller = NetworkController(configuration: .init(transport: FixtureTransport(), observability: .init(notificationCenter: nil)))
        let error = try #require(throws: DepotError.self) {
            try controller.results(for: Item.all(), refreshing: FetchItems(url: URL(string: "http://fixtures.test/items")!))
        }
        #expect(error.code == .storage)
        #expect("\(error)".contains("this controller has no store: set Configuration.store"))
        _ = await controller.shutdown(grace: .zero)
    }

    /// What `perform` returning promises for a caching operation: its rows
    /// are in the store (a read sees them at once); live results show them
    /// once ``Store/settled()`` returns, without polling.
    @Test func afterPerformTheRowsAreStoredAndOnceSettledTheyAreShown() async throws {
        let store = try Store.inMemory(migrator: Item.migrator)
        let items = [Item(id: 1, section: "a", rank: 1, title: "one"), Item(id: 2, section: "a", rank: 2, title: "two")]
        let transport = FixtureTransport(["/items": .data(try JSONEncoder().encode(items))])
        let controller = NetworkController(configuration: .init(transport: transport, observability: .init(notificationCenter: nil)), store: store)
        let results = try ResultsController(store: store, request: Item.bySection)
        #expect(results.fetchedObjects.isEmpty)

        _ = try await controller.perform(FetchItems(url: URL(string: "http://fixtures.test/items")!))
        #expect(try await store.read { db in try Item.fetchCount(db) } == 2)
        await store.settled()
        #expect(results.fetchedObjects.map(\.title) == ["one", "two"])
        _ = await controller.shutdown(grace: .zero)
    }
}
