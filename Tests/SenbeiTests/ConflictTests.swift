import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// Two clients, each with its own cache file, editing the same contacts on
/// one depot-server: the fixture's app (A) edits offline, a second app (B)
/// online. Nothing either saved is lost: changes to different fields are
/// merged without asking, a field both changed is a conflict kept for A, and
/// a contact B deleted is a conflict that says so.
@Suite(.timeLimit(.minutes(2)))
@MainActor
struct ConflictTests {
    /// Runs `body` with a second client, signed in: its own store file and controller, the same server.
    func withSecondClient(_ f: Fixture, _ body: @MainActor (SenbeiApp) async throws -> Void) async throws {
        try await StoreFixtures.withStore(migrator: SenbeiSchema.migrator) { store in
            try await withApp(store: store, server: f.server.baseURL, date: f.date) { app in
                _ = try await app.login()
                try await body(app)
            }
        }
    }

    /// The contact as the server has it now (read by `client`, which caches it).
    func onServer(_ id: Int, via client: SenbeiApp) async throws -> Entity {
        try await client.controller.perform(FetchContact(id: id))
    }

    /// A's cached contact.
    func cached(_ f: Fixture, _ id: Int) async throws -> Entity? {
        try await f.store.read { db in try Entity.fetchOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": id]) }
    }

    /// Both read page 1; A edits contact 1 offline (`mine`), B edits it online
    /// (`theirs`); then A comes back online and sends. Returns A's entry.
    func editBoth(
        _ f: Fixture, _ b: SenbeiApp,
        mine: @escaping (ContactFields) throws(DepotError) -> ContactFields,
        theirs: (SenbeiApp) async throws -> Void
    ) async throws -> OutboxEntry.ID {
        try await f.app.login()
        _ = try await f.app.loadPage(.contacts)
        _ = try await b.loadPage(.contacts)
        var queued: OutboxEntry.ID?
        try await f.withOfflineApp { app in
            let change = try await app.editContact(id: 1, mine)
            guard case .queued(let entry) = try await app.outcome(of: change) else {
                Issue.record("sent without a server")
                return
            }
            queued = entry
            #expect(try await app.store.read { db in try RecordState.of(Entity.contactKey(1), in: db) } == RecordState(hasPendingWrites: true))
        }
        try await theirs(b)
        try await f.app.start()
        await f.app.outbox.waitUntilIdle()
        return try #require(queued)
    }

    @Test func editsOfDifferentFieldsAreBothKeptWithoutAsking() async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                _ = try await editBoth(f, b, mine: { fields throws(DepotError) in try fields.setting("phone", to: "555-0101") }) { b in
                    let change = try await b.editContact(id: 1) { fields throws(DepotError) in try fields.setting("company", to: "Theirs Ltd") }
                    guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's edit was not sent") }
                }
                let server = try await onServer(1, via: b)
                #expect(server.phone == "555-0101" && server.company == "Theirs Ltd")
                #expect(server.version == 3)
                let mine = try #require(try await cached(f, 1))
                #expect(mine.phone == "555-0101" && mine.company == "Theirs Ltd" && mine.version == 3)
                #expect(try await f.app.conflicts().isEmpty)
                #expect(try await f.app.outbox.entries().isEmpty)
                #expect(try await f.app.rejectedChanges().isEmpty)
                // One 412, then the rebased PATCH: B's and A's two.
                #expect(f.served("PATCH /contacts/") == 3)
            }
        }
    }

    @Test(arguments: ["keep mine", "keep theirs", "set"])
    func aFieldBothChangedIsKeptForTheUserAndResolved(_ resolution: String) async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                let original = try #require(try await f.app.loadPage(.contacts).items.first { $0.id == 1 })
                let changes = f.app.outbox.changes()
                let entry = try await editBoth(f, b, mine: { fields throws(DepotError) in
                    try fields.setting("email", to: "mine@a.example").setting("phone", to: "555-0101")
                }) { b in
                    let change = try await b.editContact(id: 1) { fields throws(DepotError) in try fields.setting("email", to: "theirs@b.example") }
                    guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's edit was not sent") }
                }
                // Kept, with both sides of the one field both changed.
                let conflict = try #require(try await f.app.conflicts().first)
                #expect(conflict.id == entry && conflict.record == Entity.contactKey(1))
                #expect(conflict.fields == [FieldConflict(field: "email", base: original.email, mine: "mine@a.example", theirs: "theirs@b.example")])
                #expect(try await f.app.outbox.snapshot().conflicts.map(\.id) == [entry])
                var steps: [OutboxChange.Step] = []
                for await change in changes where change.entry == entry.rawValue {
                    if let step = change.step { steps.append(step) }
                    if change.step == .conflicted {
                        #expect(change.conflicts == 1)
                        break
                    }
                }
                #expect(steps == [.sending, .conflicted], "sent once, then kept: \(steps)")
                // A still shows what it wrote, marked; the server has B's.
                #expect(try await cached(f, 1)?.email == "mine@a.example")
                #expect(try await f.app.loadPage(.contacts).states[1] == RecordState(hasPendingWrites: true, hasConflict: true))
                #expect(try await onServer(1, via: b).email == "theirs@b.example")
                // Only its lane waits: A's other changes go on.
                let task = try await f.app.createTask(name: "Call Ann")
                guard case .sent = try await f.app.outcome(of: task) else { throw DepotError(.processing, detail: "another lane waited for the conflict") }

                switch resolution {
                case "keep mine":
                    try await f.app.resolveConflict(entry, keeping: .mine)
                case "keep theirs":
                    try await f.app.resolveConflict(entry, keeping: .theirs)
                default:
                    try await f.app.resolveConflict(entry, setting: "email", to: "both@ab.example")
                }
                await f.app.outbox.waitUntilIdle()
                #expect(try await f.app.conflicts().isEmpty)
                #expect(try await f.app.outbox.entries().isEmpty)
                let server = try await onServer(1, via: b)
                let mine = try #require(try await cached(f, 1))
                switch resolution {
                case "keep mine":
                    #expect(server.email == "mine@a.example" && server.phone == "555-0101" && server.version == 3)
                case "keep theirs":
                    #expect(server.email == "theirs@b.example" && server.phone == nil && server.version == 2)
                default:
                    #expect(server.email == "both@ab.example" && server.phone == "555-0101" && server.version == 3)
                }
                #expect(mine.email == server.email && mine.phone == server.phone && mine.version == server.version)
                #expect(try await f.app.loadPage(.contacts).states[1] == nil)
            }
        }
    }

    @Test func anEditOfAContactDeletedOnTheServerIsAConflictThatSaysSo() async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                let entry = try await editBoth(f, b, mine: { fields throws(DepotError) in try fields.setting("name", to: "Renamed") }) { b in
                    let change = try await b.deleteContact(id: 1)
                    guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's delete was not sent") }
                }
                let conflict = try #require(try await f.app.conflicts().first)
                #expect(conflict.id == entry && conflict.isDeletedOnServer)
                #expect(conflict.fields.map(\.field) == ["name"] && conflict.fields.first?.mine == "Renamed")
                #expect(conflict.description.contains("deleted on the server"))
                // Mine cannot be kept on a contact that is gone.
                await #expect(throws: DepotError.self) { try await f.app.resolveConflict(entry, keeping: .mine) }
                #expect(try await f.app.conflicts().count == 1)
                try await f.app.resolveConflict(entry, keeping: .theirs)
                #expect(try await cached(f, 1) == nil)
                #expect(try await f.app.conflicts().isEmpty)
            }
        }
    }

    @Test func aDeletionOfAContactSomeoneChangedIsGivenUpAndSaysSo() async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                try await f.app.login()
                _ = try await f.app.loadPage(.contacts)
                _ = try await b.loadPage(.contacts)
                try await f.withOfflineApp { app in
                    _ = try await app.deleteContact(id: 1)
                    #expect(try await app.loadPage(.contacts).items.first { $0.id == 1 }?.pending == .delete)
                }
                let change = try await b.editContact(id: 1) { fields throws(DepotError) in try fields.setting("company", to: "Still Here Ltd") }
                guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's edit was not sent") }
                try await f.app.start()
                await f.app.outbox.waitUntilIdle()
                // Their change stands, on A's screen too; the refusal says why.
                #expect(try await onServer(1, via: b).company == "Still Here Ltd")
                let kept = try #require(try await cached(f, 1))
                #expect(kept.company == "Still Here Ltd" && kept.pending == nil && kept.version == 2)
                let reasons = try await f.app.rejectedChanges().map(\.reason)
                #expect(reasons == ["it was changed on the server since you read it, so it was kept"])
                #expect(try await f.app.outbox.entries().isEmpty)
                #expect(try await f.app.conflicts().isEmpty)
            }
        }
    }

    @Test func theSameChangeByBothWritersIsCommittedWithoutSendingItAgain() async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                let entry = try await editBoth(f, b, mine: { fields throws(DepotError) in try fields.setting("company", to: "Same Ltd") }) { b in
                    let change = try await b.editContact(id: 1) { fields throws(DepotError) in try fields.setting("company", to: "Same Ltd") }
                    guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's edit was not sent") }
                }
                // B's PATCH and A's refused one: nothing was left to send.
                #expect(f.served("PATCH /contacts/") == 2)
                #expect(try await f.app.outbox.entries().isEmpty)
                #expect(try await f.app.conflicts().isEmpty)
                #expect(try await f.app.outbox.outcome(of: entry).get().status == 200)
                let contact = try #require(try await cached(f, 1))
                #expect(contact.company == "Same Ltd" && contact.version == 2)
            }
        }
    }

    @Test func anEntryWhoseConflictRecordWasLostIsSentAgainAndFindsItAnew() async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                let entry = try await editBoth(f, b, mine: { fields throws(DepotError) in try fields.setting("email", to: "mine@a.example") }) { b in
                    let change = try await b.editContact(id: 1) { fields throws(DepotError) in try fields.setting("email", to: "theirs@b.example") }
                    guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's edit was not sent") }
                }
                // As a rebuilt store keeps it: the outbox entry, not its conflict.
                try await f.store.write { db in try db.execute(sql: "DELETE FROM depot_conflicts") }
                #expect(try await f.app.conflicts().isEmpty)
                try await f.app.start()
                await f.app.outbox.waitUntilIdle()
                #expect(try await f.app.conflicts().map(\.id) == [entry])
                #expect(try await f.app.outbox.snapshot().conflicts.count == 1)
            }
        }
    }

    @Test func aConflictSurvivesARelaunchAndStillHoldsItsLane() async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                let entry = try await editBoth(f, b, mine: { fields throws(DepotError) in try fields.setting("email", to: "mine@a.example") }) { b in
                    let change = try await b.editContact(id: 1) { fields throws(DepotError) in try fields.setting("email", to: "theirs@b.example") }
                    guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's edit was not sent") }
                }
                // A second edit of the same contact, queued behind the conflict.
                _ = try await f.app.editContact(id: 1) { fields throws(DepotError) in try fields.setting("phone", to: "555-0199") }
                // Its lane stops at the conflict: idle, with the edit still queued.
                await f.app.outbox.waitUntilIdle()
                #expect(try await f.app.outbox.entries().map(\.state) == [.conflict, .pending])
                _ = await f.app.shutdown(grace: .zero)

                // A later launch on the same file.
                try await withApp(store: f.store, server: f.server.baseURL, date: f.date) { relaunched in
                    _ = try await relaunched.login()
                    try await relaunched.start()
                    await relaunched.outbox.waitUntilIdle()
                    #expect(try await relaunched.conflicts().map(\.id) == [entry])
                    #expect(try await relaunched.outbox.entries().map(\.state) == [.conflict, .pending])
                    #expect(try await onServer(1, via: b).phone == nil, "the edit behind the conflict waited")
                    try await relaunched.resolveConflict(entry, keeping: .mine)
                    await relaunched.outbox.waitUntilIdle()
                    let server = try await onServer(1, via: b)
                    #expect(server.email == "mine@a.example" && server.phone == "555-0199")
                    #expect(try await relaunched.outbox.entries().isEmpty)
                }
            }
        }
    }

    @Test func oneUsersSuccessiveEditsOfAContactNeverConflictWithEachOther() async throws {
        try await withSenbei { f in
            try await f.app.login()
            _ = try await f.app.loadPage(.contacts)
            try await f.withOfflineApp { app in
                for (field, value) in [("email", "one@a.example"), ("phone", "555-0102"), ("email", "two@a.example")] {
                    _ = try await app.editContact(id: 1) { fields throws(DepotError) in try fields.setting(field, to: value) }
                }
                #expect(try await app.outbox.entries().count == 3)
            }
            try await f.app.start()
            await f.app.outbox.waitUntilIdle()
            #expect(try await f.app.outbox.entries().isEmpty)
            // Each went once, on the version the one before it made: no 412.
            #expect(f.served("PATCH /contacts/") == 3)
            let contact = try #require(try await cached(f, 1))
            #expect(contact.email == "two@a.example" && contact.phone == "555-0102" && contact.version == 4)
        }
    }

    @Test func aRefreshFromALaggingReplicaDoesNotUndoTheUsersOwnWrite() async throws {
        // The replica: a second server with the same seed, still at version 1.
        try await DemoServer.withRunning(.init(seed: 7)) { replica in
            try await withSenbei { f in
                try await f.app.login()
                _ = try await f.app.loadPage(.contacts)
                let change = try await f.app.editContact(id: 1) { fields throws(DepotError) in try fields.setting("email", to: "new@a.example") }
                guard case .sent(let saved) = try await f.app.outcome(of: change) else { throw DepotError(.processing, detail: "the edit was not sent") }
                #expect(saved.version == 2)

                // The same store refreshed through the replica: page 1 at version 1.
                var configuration = NetworkController.Configuration(
                    baseURL: replica.baseURL, transport: AsyncHTTPClientTransport(),
                    adapters: [Credentials.basic(username: "admin", password: "secret", for: replica.baseURL)])
                configuration.store = f.store
                let lagging = NetworkController(configuration: configuration)
                let listed = try await lagging.perform(FetchList(.contacts))
                #expect((listed.written ?? 0) > 0)
                _ = await lagging.shutdown(grace: .zero)

                let contact = try #require(try await cached(f, 1))
                #expect(contact.email == "new@a.example" && contact.version == 2)
                #expect(try await f.store.read { db in try RecordVersions.version(of: Entity.contactKey(1), in: db) } == RecordVersion(2))
                // The change feed's copy of an older version changes nothing either.
                try await f.store.write { db in
                    try CRMFeed().apply(.contact(Entity(kind: .contacts, id: 1, name: "Old", email: "old@a.example", version: 1)), to: db)
                }
                #expect(try await cached(f, 1)?.email == "new@a.example")
            }
        }
    }

    /// A contact with its outbox state, as a list row reads it.
    struct ContactRow: FetchableRecord, Sendable, Hashable, Identifiable {
        var id: Int { contact.id }
        var contact: Entity
        var state: RecordState
        init(row: Row) throws {
            contact = try Entity(row: row)
            state = RecordState(row: row)
        }
    }

    @Test func resultsRowsSayWhichRecordsWaitOrAreInConflict() async throws {
        try await withSenbei { f in
            try await withSecondClient(f) { b in
                let alias = TableAlias()
                let request = Entity.aliased(alias).filter(Column("kind") == "contacts" && Column("id") <= 2).order(Column("id"))
                    .annotated(with: RecordState.columns(kind: "contact", id: alias[Column("id")]))
                    .asRequest(of: ContactRow.self)
                try await f.app.login()
                _ = try await f.app.loadPage(.contacts)
                let results = try ResultsController(store: f.store, request: request)
                #expect(results.fetchedObjects.map(\.state) == [RecordState(), RecordState()])
                let entry = try await editBoth(f, b, mine: { fields throws(DepotError) in try fields.setting("email", to: "mine@a.example") }) { b in
                    let change = try await b.editContact(id: 1) { fields throws(DepotError) in try fields.setting("email", to: "theirs@b.example") }
                    guard case .sent = try await b.outcome(of: change) else { throw DepotError(.processing, detail: "B's edit was not sent") }
                }
                await f.store.settled()
                #expect(results.fetchedObjects.map(\.state) == [RecordState(hasPendingWrites: true, hasConflict: true), RecordState()])
                #expect(results.fetchedObjects.first?.contact.email == "mine@a.example")
                try await f.app.resolveConflict(entry, keeping: .theirs)
                await f.store.settled()
                #expect(results.fetchedObjects.map(\.state) == [RecordState(), RecordState()])
                #expect(results.fetchedObjects.first?.contact.email == "theirs@b.example")
            }
        }
    }
}
