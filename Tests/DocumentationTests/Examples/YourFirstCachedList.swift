import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing

// Sources/DepotStore/DepotStore.docc/YourFirstCachedList.md. Its types are
// top-level: TestingYourOperations.md uses them too, and links here.

struct CachedContact: Codable, Sendable, Identifiable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int
    var name: String
    var email: String?
}

extension DatabaseMigrator {
    static var contacts: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create cachedContact") { db in
            try db.create(table: "cachedContact") { table in
                table.primaryKey("id", .integer)
                table.column("name", .text).notNull()
                table.column("email", .text)
            }
        }
        return migrator
    }
}

struct SyncContacts: CachingOperation {
    struct Page: Decodable, Sendable {
        var items: [CachedContact]
    }

    var request: NetworkRequest { .get("contacts", query: ["per_page": "100"]) }
    var cacheKey: String { "contacts" }

    func write(_ page: Page, to db: Database) throws -> Int {
        try CachedContact.deleteAll(db)
        for contact in page.items { try contact.insert(db) }
        return page.items.count
    }
}

@MainActor
final class ContactsScreen {
    private(set) var names: [String] = []
    private(set) var statusLine = ""
    private let contacts: ResultsController<CachedContact>
    private var observation: ResultsObservation?
    private var statusUpdates: Task<Void, Never>?

    init(contacts: ResultsController<CachedContact>) {
        self.contacts = contacts
        observation = contacts.start { [weak self] update in
            // A table view applies update.changes instead (nil for the first update).
            self?.names = update.snapshot.fetchedObjects.map(\.name)
        }
        if let status = contacts.syncStatus {      // always set by results(for:refreshing:)
            statusUpdates = Task { [weak self] in
                for await state in status.updates() {
                    self?.statusLine = ContactsScreen.line(for: state)
                }
            }
        }
    }

    deinit { statusUpdates?.cancel() }

    func pullToRefresh() async {
        await contacts.syncStatus?.refresh(force: true)
    }

    static func line(for state: SyncStatus.State) -> String {
        let time = state.lastSynced.map { $0.formatted(date: .omitted, time: .shortened) }
        if let error = state.lastError {
            let what = error.code == .offline ? "offline" : "sync failed: \(error.message)"
            return time.map { "\(what) · showing contacts from \($0)" } ?? "\(what) · nothing cached yet"
        }
        if state.isSyncing { return "syncing…" }
        return time.map { "last synced \($0)" } ?? "not synced yet"
    }
}

@MainActor
final class ContactsApp {
    let controller: NetworkController
    let screen: ContactsScreen

    init(cacheFolder: URL, server: URL) throws {
        let store = try Store(path: cacheFolder.appending(path: "contacts.sqlite").path, migrator: .contacts)
        let controller = NetworkController(
            configuration: .init(baseURL: server, adapters: [Credentials.basic(username: "admin", password: "secret", for: server)]),
            store: store)
        self.controller = controller
        let contacts = try controller.results(for: CachedContact.order(Column("name")),
                                              refreshing: SyncContacts(),
                                              policy: .cacheFirst(maxAge: .seconds(300)))
        screen = ContactsScreen(contacts: contacts)
    }

    func quit() async {
        _ = await controller.shutdown(grace: .seconds(5))
    }
}

enum YourFirstCachedListExamples {
    static func attachTheOldWay(store: Store, server: URL) -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: server)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        return controller
    }
}

@Suite(.timeLimit(.minutes(1))) @MainActor struct ContactsTests {
    let server = URL(string: "http://fixtures.test")!
    let twoContacts = Data(#"{"items": [{"id": 2, "name": "Bob"}, {"id": 1, "name": "Ann"}]}"#.utf8)

    @Test func theListSurvivesAnOfflineRestart() async throws {
        let transport = FixtureTransport(["/contacts": .data(twoContacts)])
        let date = ManualDate()
        try await StoreFixtures.withStore(migrator: .contacts, environment: .init(date: date.provider)) { store in
            // Given a first launch that synced two contacts, and quit
            let first = NetworkController(configuration: .init(baseURL: server, transport: transport), store: store)
            _ = try await first.perform(SyncContacts())
            _ = await first.shutdown(grace: .zero)
            try await store.close()

            // When the app starts again an hour later, with no network
            date.advance(by: 3600)
            transport.isOffline = true
            let reopened = try Store(path: try #require(store.path), migrator: .contacts, environment: .init(date: date.provider))
            let second = NetworkController(configuration: .init(baseURL: server, transport: transport, environment: .init(clock: ManualClock())), store: reopened)
            let contacts = try second.results(for: CachedContact.order(Column("name")), refreshing: SyncContacts())
            let status = try #require(contacts.syncStatus)
            let screen = ContactsScreen(contacts: contacts)

            // Then the rows, and when they arrived, are on screen at once
            #expect(screen.names == ["Ann", "Bob"])
            #expect(status.lastSynced == date.now.addingTimeInterval(-3600))

            // And the refresh waits for the network, and says so
            for await state in status.updates() where state.lastError != nil { break }
            #expect(status.lastError?.code == .offline)
            #expect(status.isSyncing)
            #expect(ContactsScreen.line(for: status.state).hasPrefix("offline · showing contacts from "))
            _ = await second.shutdown(grace: .zero)
            try await reopened.close()
        }
    }
}
