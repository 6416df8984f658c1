import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing

// Sources/Depot/Depot.docc/TestingYourOperations.md

/// The contacts endpoint, read from any URL (a `file://` fixture in tests).
struct FetchContactsFile: NetworkOperation {
    var url: URL
    var request: NetworkRequest { .get(url) }

    func process(_ response: NetworkResponse, context: OperationContext) async throws -> [Contact] {
        try response.decode(Page<Contact>.self).items
    }
}

enum TestingYourOperationsExamples {
    static func callProcess(fixture: Data) async throws -> [Contact] {
        let response = NetworkResponse(status: 200, body: fixture, url: URL(string: "http://test/contacts")!)
        let contacts = try await FetchContacts().process(response, context: OperationContext())
        return contacts
    }

    static func callProcessWithAStore(_ response: NetworkResponse, store: Store) async throws -> CacheUpdate<Int> {
        var values = OperationContextValues()
        values.store = store
        let update = try await FetchCachedContacts().process(response, context: OperationContext(values: values))
        return update
    }

    static func pointItAtAFile(fixtureURL: URL) async throws -> [Contact] {
        let controller = NetworkController(configuration: .init(transport: FileTransport()))
        let contacts = try await controller.perform(FetchContactsFile(url: fixtureURL))
        return contacts
    }

    static func storeFixtures(fixtureURL: URL) async throws {
        try await StoreFixtures.withStore(migrator: migrator) { store in
            try await StoreFixtures.perform(FetchCachedContacts(), respondingWith: fixtureURL, in: store)
            let count = try await store.read { db in try CachedContact.fetchCount(db) }
            _ = count
        }
    }

    static func manualClock(api: URL, transport: any Transport) async {
        let clock = ManualClock()
        let controller = NetworkController(configuration: .init(baseURL: api, transport: transport, clock: clock))
        controller.enqueue(SendPost(text: "hi"))     // .finish, and this transport never answers
        let shutdown = Task { await controller.shutdown(grace: .seconds(5)) }
        await clock.sleepers(atLeast: 2)             // the post's timeout and the grace period
        clock.advance(by: .seconds(5))
        #expect(await shutdown.value.graceExpired)
    }
}
