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
        let controller = NetworkController(configuration: .init(transport: FixtureTransport(), notificationCenter: nil))
        let error = try #require(throws: DepotError.self) {
            try controller.results(for: Item.all(), refreshing: FetchItems(url: URL(string: "http://fixtures.test/items")!))
        }
        #expect(error.code == .storage)
        #expect("\(error)".contains("this controller has no store: set Configuration.store"))
        _ = await controller.shutdown(grace: .zero)
    }
}
