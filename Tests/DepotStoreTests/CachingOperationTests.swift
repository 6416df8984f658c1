import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

@Suite struct CachingOperationTests {
    let base = URL(string: "http://fixtures.test")!

    func controller(_ transport: FixtureTransport, store: Store) -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: base, transport: transport)
        configuration.store = store
        return NetworkController(configuration: configuration)
    }

    @Test func writesRowsAndLedgerInOneGo() async throws {
        let date = ManualDate()
        try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(10)), headers: ["ETag": "\"v1\""])])
            let controller = controller(transport, store: store)

            let update = try await controller.perform(FetchItems(url: base.appending(path: "items")))

            #expect(update == .updated(10))
            #expect(try await store.read { db in try Item.fetchCount(db) } == 10)
            let entry = try #require(try await store.ledger.entry(for: "items"))
            #expect(entry.lastSynced == date.now)
            #expect(entry.etag == "\"v1\"")
        }
    }

    /// The issue's test: a body valid for 500 items and then malformed leaves the
    /// table exactly as it was, and observers see nothing.
    @Test func malformedAfter500ItemsLeavesTheTableExactlyAsItWas() async throws {
        try await StoreFixtures.withStore(migrator: Item.migrator) { store in
            // Given a table with 3 rows
            let before = [Item(id: 9001, section: "x", rank: 1, title: "old one"), Item(id: 9002, section: "x", rank: 2, title: "old two"), Item(id: 1, section: "x", rank: 3, title: "old three")]
            try await store.write { db in for item in before { try item.insert(db) } }
            let observed = Counter()
            let observation = DatabaseRegionObservation(tracking: Item.all())
            let cancellable = observation.start(in: store.writer, onError: { _ in }, onChange: { _ in observed.increment() })
            defer { cancellable.cancel() }

            // When a stream of 500 good lines then a malformed one is processed inside the transaction
            var lines = try makeItems(500).map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
            lines.append(#"{"id": 501, "section": "s1", "rank": "#)
            let transport = FixtureTransport(["/stream": .data(Data(lines.joined(separator: "\n").utf8))])
            let error = await #expect(throws: DepotError.self) {
                try await controller(transport, store: store).perform(StreamItems(url: base.appending(path: "stream")))
            }

            // Then the error says decoding, the table is exactly as before, and no commit was observed
            #expect(error?.code == .decoding)
            let after = try await store.read { db in try Item.order(Column("id")).fetchAll(db) }
            #expect(after == before.sorted { $0.id < $1.id })
            #expect(observed.value == 0)
            // And the ledger remembers the failure
            #expect(try await store.ledger.entry(for: "stream-items")?.lastError?.code == .decoding)
        }
    }

    @Test func malformedJSONAndBadStatusKeepTheCache() async throws {
        try await StoreFixtures.withStore(migrator: Item.migrator) { store in
            let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(5)))])
            let controller = controller(transport, store: store)
            let fetch = FetchItems(url: base.appending(path: "items"))
            _ = try await controller.perform(fetch)

            transport.respond(to: "/items", with: .data(Data("[{\"id\": 1,".utf8)))
            let truncated = await #expect(throws: DepotError.self) { try await controller.perform(fetch) }
            #expect(truncated?.code == .decoding)

            transport.respond(to: "/items", with: .status(500))
            let server = await #expect(throws: DepotError.self) { try await controller.perform(fetch) }
            #expect(server?.code == .server)

            #expect(try await store.read { db in try Item.fetchCount(db) } == 5)
        }
    }

    @Test func conditionalRequestSendsValidatorsAndA304KeepsTheData() async throws {
        let date = ManualDate()
        try await StoreFixtures.withStore(migrator: Item.migrator, environment: .init(date: date.provider)) { store in
            let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(4)), headers: ["ETag": "\"v1\"", "Last-Modified": "Tue, 01 Sep 2026 10:00:00 GMT"])])
            let controller = controller(transport, store: store)
            let fetch = FetchItems(url: base.appending(path: "items"))
            _ = try await controller.perform(fetch)
            #expect(transport.requests.last?.headers["If-None-Match"] == nil)

            transport.respond(to: "/items", with: .status(304))
            date.advance(by: 120)
            let update = try await controller.perform(fetch)

            #expect(update == .notModified)
            #expect(transport.requests.last?.headers["If-None-Match"] == "\"v1\"")
            #expect(transport.requests.last?.headers["If-Modified-Since"] == "Tue, 01 Sep 2026 10:00:00 GMT")
            #expect(try await store.read { db in try Item.fetchCount(db) } == 4)
            #expect(try await store.ledger.entry(for: "items")?.lastSynced == date.now)
        }
    }

    @Test func a304ToARequestWithoutValidatorsIsAnErrorAndMarksNothingSynced() async throws {
        try await StoreFixtures.withStore(migrator: Item.migrator) { store in
            // Given nothing cached, and a server (or proxy) that answers 304 anyway
            let transport = FixtureTransport(["/items": .status(304)])
            let controller = controller(transport, store: store)
            let fetch = FetchItems(url: base.appending(path: "items"))

            // Then the sync fails, and the ledger does not call the empty cache fresh
            let error = await #expect(throws: DepotError.self) { try await controller.perform(fetch) }
            #expect(error?.code == .unexpectedStatus)
            #expect(error?.status == 304)
            #expect(transport.requests.last?.headers["If-None-Match"] == nil)
            let entry = try await store.ledger.entry(for: "items")
            #expect(entry?.lastSynced == nil)
            #expect(entry?.lastError?.code == .unexpectedStatus)
        }
    }

    @Test func withoutAStoreTheErrorSaysSo() async throws {
        let transport = FixtureTransport(["/items": .data(try jsonData(makeItems(1)))])
        let controller = NetworkController(configuration: .init(baseURL: base, transport: transport))
        let error = await #expect(throws: DepotError.self) {
            try await controller.perform(FetchItems(url: base.appending(path: "items")))
        }
        #expect(error?.code == .storage)
        #expect(error?.description.contains("no store") == true)
    }
}
