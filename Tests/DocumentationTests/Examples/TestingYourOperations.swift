import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing

// Sources/DepotTesting/DepotTesting.docc/TestingYourOperations.md. It uses
// FetchContacts, Contact and PublishPost (GettingStarted.swift), SyncContacts,
// CachedContact and the .contacts migrator (YourFirstCachedList.swift), and
// SendPost, PostRow and the .posts migrator (OfflineWrites.swift): the article
// links to each of those articles.

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
        let update = try await SyncContacts().process(response, context: OperationContext(values: values))
        return update
    }

    static func pointItAtAFile(fixtureURL: URL) async throws -> [Contact] {
        let controller = NetworkController(configuration: .init(transport: FileTransport()))
        let contacts = try await controller.perform(FetchContactsFile(url: fixtureURL))
        return contacts
    }

    /// `fixtureURL`: a file with one contact.
    static func storeFixtures(fixtureURL: URL) async throws {
        try await StoreFixtures.withStore(migrator: .contacts) { store in
            try await StoreFixtures.perform(SyncContacts(), respondingWith: fixtureURL, in: store)
            #expect(try await store.read { db in try CachedContact.fetchCount(db) } == 1)
        }
    }
}

@Suite(.timeLimit(.minutes(1))) struct TestingYourOperationsTests {
    let api = URL(string: "http://api.test")!

    @Test func fixturesByPath() async throws {
        let transport = FixtureTransport(["/contacts": .data(Data(#"{"items": [{"id": 1, "name": "Ann"}]}"#.utf8))])
        let controller = NetworkController(configuration: .init(baseURL: api, transport: transport))

        let contacts = try await controller.perform(FetchContacts())
        #expect(contacts.map(\.name) == ["Ann"])
        #expect(transport.requests.map(\.url.query) == ["page=1"])

        transport.respond(to: "/contacts", with: .status(404))
        await #expect(throws: DepotError.self) { try await controller.perform(FetchContacts(page: 9)) }
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func aFetchHeldAtTheGate() async throws {
        let contactsJSON = Data(#"{"items": [{"id": 1, "name": "Ann"}]}"#.utf8)
        let transport = ScriptedTransport()
        transport.respond(to: "/contacts", with: .status(200, body: contactsJSON).gated)
        let controller = NetworkController(configuration: .init(baseURL: api, transport: transport))

        let contacts = Task { try await controller.perform(FetchContacts()) }
        try await transport.waitingAtGate(atLeast: 1)       // the fetch is under way
        #expect(controller.activity.running == 1)
        transport.letThrough(1)
        #expect(try await contacts.value.map(\.name) == ["Ann"])
        #expect(transport.exchanges.map(\.status) == [200])
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func aRetryAfter503OnASimulatedLink() async throws {
        let contactsJSON = Data(#"{"items": [{"id": 1, "name": "Ann"}]}"#.utf8)
        let clock = ManualClock()
        let simulator = NetworkSimulator(
            clock: clock,
            link: .init(bandwidth: 1_000_000, rtt: .milliseconds(100)),     // 1 Mbit/s, 100 ms
            routes: [NetworkSimulator.Route(path: "/contacts", body: contactsJSON)
                .failing(1, with: .status(503, headers: ["Retry-After": "2"]))])
        let controller = NetworkController(configuration: .init(baseURL: api, transport: simulator, environment: .init(clock: clock)))

        let ticket = controller.enqueue(FetchContacts())
        try await simulator.run(until: { ticket.isFinished }, settled: simulator.settled(with: controller))

        #expect(simulator.records.map(\.status) == [503, 200])
        #expect(clock.elapsed >= .seconds(2))      // it waited as the server asked, in no real time
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func theGraceEndsOnTheTestsClock() async {
        let clock = ManualClock()
        let transport = ScriptedTransport(.status(201).gated)
        let controller = NetworkController(configuration: .init(baseURL: api, transport: transport, environment: .init(clock: clock)))
        controller.enqueue(PublishPost(text: "hi"))     // .finish, and its request waits at the gate
        let shutdown = Task { await controller.shutdown(grace: .seconds(5)) }
        await clock.sleepers(atLeast: 2)             // the post's timeout and the grace period
        clock.advance(by: .seconds(5))
        #expect(await shutdown.value.graceExpired)
    }

    @Test func aSentPostIsCommittedInPlace() async throws {
        let transport = FixtureTransport(["/posts": .data(Data(#"{"id": 42, "text": "hi"}"#.utf8), status: 201)])
        try await StoreFixtures.withStore(migrator: .posts) { store in
            let controller = NetworkController(configuration: .init(baseURL: api, transport: transport), store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])

            let ticket = try await outbox.send(SendPost(payload: .init(localID: "local-1", text: "hi")))
            #expect(try await ticket.outcome().get().status == 201)

            let row = try await store.read { db in try PostRow.fetchOne(db, key: "local-1") }
            #expect(row == PostRow(id: "local-1", serverID: 42, text: "hi", isPending: false))
            #expect(transport.requests.first?.headers["Idempotency-Key"] != nil)
            _ = await controller.shutdown(grace: .zero)
            await outbox.waitUntilIdle()
        }
    }

    @Test func aRefusedPostIsRolledBack() async throws {
        let transport = FixtureTransport(["/posts": .data(Data(#"{"errors": {"text": ["is too long"]}}"#.utf8), status: 422)])
        try await StoreFixtures.withStore(migrator: .posts) { store in
            let controller = NetworkController(configuration: .init(baseURL: api, transport: transport), store: store)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])

            let ticket = try await outbox.send(SendPost(payload: .init(localID: "local-2", text: "far too long")))
            await #expect(throws: DepotError.self) { try await ticket.outcome().get() }

            #expect(try await store.read { db in try PostRow.fetchCount(db) } == 0)
            _ = await controller.shutdown(grace: .zero)
            await outbox.waitUntilIdle()
        }
    }
}
