import DemoServer
import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// `CRMFeed` and `SenbeiApp.live` against a real depot-server: another
/// client's contacts and tasks reach the cache, the task list and the search.
@MainActor
@Suite(.timeLimit(.minutes(2))) struct CRMFeedTests {
    /// Waits until the status says `state`.
    func until(_ status: SyncStatus, is state: LiveState) async throws {
        let updates = Recorder(status.updates(), timeout: .seconds(30))
        _ = try await updates.next { $0.live == state }
    }

    /// Waits until `events` brought `count` changes, and returns them.
    func changes(_ events: Recorder<LiveFeedEvent<CRMChange>>, count: Int) async throws -> [CRMChange] {
        var seen: [CRMChange] = []
        while seen.count < count {
            if case .applied(let changes) = try await events.next() { seen += changes }
        }
        return seen
    }

    /// The contacts of page 1 as cached, in order.
    func pageOne(_ fixture: Fixture) async throws -> [Entity] {
        try await fixture.store.read { db in try Entity.onPage(.contacts, 1).fetchAll(db) }
    }

    @Test func othersContactsAndTasksReachTheCacheTheTaskListAndTheSearch() async throws {
        try await withSenbei(server: .init(seed: 7, epoch: Date())) { fixture in
            let app = fixture.app
            // Given a signed-in app that shows page 1 of the contacts, the tasks,
            // and a search for "contact" that matches no one yet
            try await app.login()
            let listed = try await app.loadPage(.contacts)
            _ = try await app.loadTasks()
            let search = ContactSearch(app: app)
            search.update(query: "contact")
            await search.settled()
            #expect(search.contacts.isEmpty)
            let events = Recorder(app.live.events(), timeout: .seconds(30))
            let watch = app.live.watch()
            try await until(app.live.status, is: .live)

            // When another client adds two contacts and a task
            try await fixture.makeChanges(contacts: 2, tasks: 1)
            let seen = try await changes(events, count: 3)

            // Then they are in the cache as Senbei's own writes put them: the
            // contacts on top of page 1, counted, the task among the open ones
            let names = seen.compactMap { if case .contact(let contact) = $0 { contact.name } else { nil } }
            #expect(names.count == 2 && names.allSatisfy { $0.hasPrefix("Contact ") }, "\(seen)")
            let page = try await pageOne(fixture)
            #expect(Set(page.prefix(2).map(\.name)) == Set(names))
            #expect(Array(page.dropFirst(2).map(\.id)) == listed.items.map(\.id))
            let total = try await fixture.store.read { db in try PageInfo.fetchOne(db, key: ["kind": "contacts", "page": 1])?.total }
            #expect(total == listed.info.total + 2)
            let open = try await fixture.store.read { db in try CRMTask.open.fetchAll(db) }
            let task = try #require(open.first { $0.name.hasPrefix("Task ") })
            #expect(TaskBuckets().group(open, now: Date()).first { $0.bucket == .asap }?.tasks.contains(task) == true)
            #expect(try await fixture.store.ledger.cursor(for: CRMFeed.syncKey) == "3")
            // The contact pages are stale: the server's pages moved by two
            #expect(try await fixture.store.ledger.entry(for: FetchList(.contacts).cacheKey)?.isStale == true)

            // And the open search shows the new contacts without a keystroke
            try await observed { Set(search.contacts.map(\.name)) == Set(names) }
            #expect(search.query == "contact")
            watch.cancel()
        }
    }

    @Test func catchingUpBringsWhatOthersChangedWhileAway() async throws {
        try await withSenbei { fixture in
            let app = fixture.app
            try await app.login()
            // The first sync is a full one: the open tasks, at the server's cursor
            let first = try await app.live.catchUp()
            #expect(first.fullSync && first.cursor == "0")
            let seeded = try await fixture.store.read { db in try CRMTask.open.fetchCount(db) }
            #expect(seeded == 12)

            // Given five changes while the app was away
            try await fixture.makeChanges(contacts: 3, tasks: 2)
            let report = try await app.live.catchUp()

            // Then one page brought exactly them, and they are cached
            #expect(report == CatchUpReport(changes: 5, pages: 1, fullSync: false, cursor: "5"))
            let (contacts, tasks) = try await fixture.store.read { db in
                (try Entity.filter(Column("name").like("Contact %")).fetchCount(db), try CRMTask.open.fetchCount(db))
            }
            #expect(contacts == 3)
            #expect(tasks == seeded + 2)
            #expect(try await app.live.catchUp() == CatchUpReport(changes: 0, pages: 1, fullSync: false, cursor: "5"))
        }
    }

    @Test func aFullSyncRewritesTheTasksAndLeavesTheContactsStale() async throws {
        try await withSenbei(server: .init(seed: 7, changeHistory: 2)) { fixture in
            let app = fixture.app
            try await app.login()
            try await app.live.catchUp()
            let listed = try await app.loadPage(.contacts)
            // Given more changes than the server keeps
            try await fixture.makeChanges(contacts: 2, tasks: 3)
            let report = try await app.live.catchUp()

            // Then the server's 410 led to a full sync of the open tasks
            #expect(report.fullSync && report.cursor == "5")
            let tasks = try await fixture.store.read { db in try CRMTask.open.fetchAll(db) }
            #expect(tasks.count == 15)
            // And the contacts, which it does not rewrite, stay, marked stale
            #expect(try await pageOne(fixture).map(\.id) == listed.items.map(\.id))
            #expect(try await fixture.store.ledger.entry(for: FetchList(.contacts).cacheKey)?.isStale == true)
            let again = try await app.loadPage(.contacts)
            #expect(again.source == .network)
            #expect(again.items.prefix(2).allSatisfy { $0.name.hasPrefix("Contact ") })
        }
    }

    @Test func changesPrintSafelyAndAsExactJSON() throws {
        let hostile = "\u{1B}[2JEvil \u{9B}31m\u{202E}task\n"
        let change = CRMChange.task(CRMTask(id: 7, name: hostile, due: nil, completed: true))
        let json = SenbeiPresentation.changeJSON(change)
        #expect(terminalControls(in: json).isEmpty, "\(json)")
        #expect(json == #"{"change":"task","id":7,"name":"\u001b[2JEvil \u009b31m\u202etask\n","due":null,"completed":true}"#, "\(json)")
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(decoded["name"] as? String == hostile)
        let contact = SenbeiPresentation.changeJSON(.contact(Entity(kind: .contacts, id: 3, name: "Zoe \"Q\"", email: "z@x.io")))
        #expect(contact == #"{"change":"contact","id":3,"name":"Zoe \"Q\"","email":"z@x.io","company":null}"#)
        #expect(SenbeiPresentation.changeLine(.contact(Entity(kind: .contacts, id: 3, name: "Zoe", email: "z@x.io"))) == "contact #3      Zoe  z@x.io")
    }
}
