import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing

// Sources/DepotStore/DepotStore.docc/YourFirstCachedList.md. Its types are
// top-level: TestingYourOperations.md uses them too, and links here.

// MARK: - The light path

struct OpenTask: Codable, Sendable, Identifiable, Equatable {
    var id: Int
    var name: String
    var due: String?        // yyyy-MM-dd, or nil: as soon as possible
}

struct FetchOpenTasks: CachedValueOperation {
    typealias Value = [OpenTask]
    var request: NetworkRequest { .get("tasks") }
    var cacheKey: String { "tasks" }
}

/// The article's next app version, whose `due` means something else.
enum NextAppVersion {
    struct FetchOpenTasks: CachedValueOperation {
        typealias Value = [OpenTask]
        static var valueVersion: Int { 2 }      // `due` is the user's day now, not UTC's
        var request: NetworkRequest { .get("tasks") }
        var cacheKey: String { "tasks" }
    }
}

@MainActor
final class TasksScreen {
    private(set) var names: [String] = []
    private let tasks: LiveValue<[OpenTask]>
    private var observation: ResultsObservation?

    init(tasks: LiveValue<[OpenTask]>) {
        self.tasks = tasks
        observation = tasks.start { [weak self] value in
            self?.names = (value ?? []).map(\.name)
        }
    }

    func pullToRefresh() async {
        await tasks.syncStatus.refresh(force: true)
    }
}

struct CompleteTask: Mutation {
    static let typeName = "CompleteTask"
    var payload: Int                        // the task's id
    init(payload: Int) { self.payload = payload }

    var request: NetworkRequest { .put("tasks/\(payload)/complete") }
    var invalidates: [CacheInvalidation] { [.key("tasks")] }

    func applyOptimistically(_ db: Database) throws {
        try FetchOpenTasks().modifyCachedValue(in: db) { tasks in tasks.removeAll { $0.id == payload } }
    }
    func commit(_ response: NetworkResponse, _ db: Database) throws {}
    func rollback(_ error: DepotError, _ db: Database) throws {
        try FetchOpenTasks().revertCachedValue(in: db)
    }
}

@MainActor
final class TasksApp {
    let controller: NetworkController
    let tasks: LiveValue<[OpenTask]>
    let screen: TasksScreen
    let outbox: Outbox

    init(cacheFolder: URL, server: URL) throws {
        let store = try Store(path: cacheFolder.appending(path: "tasks.sqlite").path)
        let controller = NetworkController(
            configuration: .init(baseURL: server, adapters: [Credentials.basic(username: "admin", password: "secret", for: server)]),
            store: store)
        self.controller = controller
        let tasks = try controller.value(for: FetchOpenTasks(), policy: .cacheFirst(maxAge: .seconds(300)))
        self.tasks = tasks
        screen = TasksScreen(tasks: tasks)
        let outbox = Outbox(store: store, controller: controller, types: [CompleteTask.self])
        self.outbox = outbox
    }

    func printCounts() async {
        for await value in tasks.updates() {
            print("\(value?.count ?? 0) open tasks")
        }
    }

    func complete(_ task: OpenTask) async throws {
        _ = try await outbox.send(CompleteTask(payload: task.id))
    }
}

/// The light path's story, run on fixtures: the tasks show, a completed one
/// leaves at once offline, and the server's list follows once it is sent.
@Suite(.timeLimit(.minutes(1))) @MainActor struct OpenTasksTests {
    let server = URL(string: "http://fixtures.test")!
    let twoTasks = Data(#"[{"id": 1, "name": "Call Ann", "due": "2026-01-05", "completed": false}, {"id": 2, "name": "Write to Bob", "due": null, "completed": false}]"#.utf8)
    let oneTask = Data(#"[{"id": 2, "name": "Write to Bob", "due": null, "completed": false}]"#.utf8)

    @Test func aCompletedTaskLeavesAtOnceAndTheServersListFollows() async throws {
        let transport = FixtureTransport(["/tasks": .data(twoTasks)])
        let date = ManualDate()
        try await StoreFixtures.withStore(environment: .init(date: date.provider)) { store in
            // Given the open tasks on screen, with no table of the app's own
            let controller = NetworkController(configuration: .init(baseURL: server, transport: transport), store: store)
            let tasks = try controller.value(for: FetchOpenTasks(), policy: .cacheFirst(maxAge: .seconds(300)))
            let screen = TasksScreen(tasks: tasks)
            let updates = Recorder(tasks.updates())
            _ = try await updates.next { $0?.count == 2 }
            #expect(screen.names == ["Call Ann", "Write to Bob"])
            let states = Recorder(tasks.syncStatus.updates())
            let firstSync = try #require(try await states.next { !$0.isSyncing && $0.lastSynced != nil }.lastSynced)
            date.advance(by: 60)

            // When the user completes one, offline
            transport.isOffline = true
            let outbox = Outbox(store: store, controller: controller, types: [CompleteTask.self], waitsForNetwork: false)
            let ticket = try await outbox.send(CompleteTask(payload: 1))

            // Then it leaves the screen at once
            _ = try await updates.next { $0?.map(\.id) == [2] }
            #expect(screen.names == ["Write to Bob"])

            // And once sent, the server's list is fetched again, though the policy's five minutes have not passed
            transport.isOffline = false
            transport.respond(to: "/tasks/1/complete", with: .data(Data(#"{"id": 1, "name": "Call Ann", "completed": true}"#.utf8)))
            transport.respond(to: "/tasks", with: .data(oneTask))
            try await outbox.start()
            #expect(try await ticket.outcome().get().status == 200)
            _ = try await states.next { !$0.isSyncing && ($0.lastSynced ?? .distantPast) > firstSync }
            #expect(transport.requests.filter { $0.url.path == "/tasks" }.count == 2)
            #expect(tasks.value?.map(\.name) == ["Write to Bob"])
            _ = await controller.shutdown(grace: .zero)
        }
    }
}

// MARK: - The table path

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
