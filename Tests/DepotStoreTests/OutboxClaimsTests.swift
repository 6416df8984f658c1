import Depot
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import DepotStore

/// One sender per outbox entry: two outboxes on two `Store`s on ONE file
/// stand for two processes (to SQLite they are the same thing). Each has its
/// own controller, transport and clock; both stores read one `ManualDate`,
/// the wall date claims expire by.
@Suite(.timeLimit(.minutes(1))) struct OutboxClaimsTests {
    /// A task in lane "tasks"; no local rows.
    struct CreateTask: Mutation {
        static let typeName = "ClaimsTask"
        var payload: String
        init(payload: String) { self.payload = payload }
        var lane: String { "tasks" }
        var request: NetworkRequest { .post("tasks", json: ["name": payload]) }
        func applyOptimistically(_ db: Database) throws {}
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    /// One of the two "processes".
    struct Side {
        let store: Store
        let transport: ScriptedTransport
        let clock: ManualClock
        let controller: NetworkController
        let outbox: Outbox

        init(path: String, date: ManualDate, waitsForNetwork: Bool = true, migrator: DatabaseMigrator = DatabaseMigrator(), types: [any Mutation.Type] = [CreateTask.self]) throws {
            clock = ManualClock()
            let environment = DepotEnvironment(clock: clock, date: date.provider)
            store = try Store(path: path, migrator: migrator, environment: environment)
            transport = ScriptedTransport()
            var configuration = NetworkController.Configuration(
                baseURL: URL(string: "http://h.test")!, transport: transport, observability: .init(notificationCenter: nil), environment: environment)
            configuration.store = store
            controller = NetworkController(configuration: configuration)
            outbox = Outbox(store: store, controller: controller, types: types, waitsForNetwork: waitsForNetwork, claimDuration: .seconds(60))
        }

        func quit() async throws {
            _ = await controller.shutdown(grace: .zero)
            await outbox.waitUntilIdle()
            try await store.close()
        }
    }

    /// The claim columns of every entry, by id.
    static func claims(_ store: Store) async throws -> [Int64: String?] {
        try await store.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT id, claimedBy FROM depotOutbox").map { ($0["id"], $0["claimedBy"]) })
        }
    }

    func withTwoSides(waitsForNetwork: Bool = true, migrator: DatabaseMigrator = DatabaseMigrator(), types: [any Mutation.Type] = [CreateTask.self], _ body: (ManualDate, Side, Side) async throws -> Void) async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appending(path: "shared.sqlite").path
        let date = ManualDate()
        let one = try Side(path: path, date: date, waitsForNetwork: waitsForNetwork, migrator: migrator, types: types)
        let two = try Side(path: path, date: date, waitsForNetwork: waitsForNetwork, migrator: migrator, types: types)
        try await body(date, one, two)
        try await one.quit()
        try await two.quit()
    }

    /// While one outbox sends an entry, the other's lane waits on its own
    /// clock and sends nothing; the commit removes the entry, and the other
    /// finds nothing left when it looks again.
    @Test func aClaimedEntryIsNotSentByTheOtherOutbox() async throws {
        try await withTwoSides { date, one, two in
            one.transport.respond(to: "/tasks", with: ScriptedTransport.Answer.status(201).gated)
            two.transport.respond(to: "/tasks", with: .status(201))
            let ticket = try await one.outbox.send(CreateTask(payload: "once"))
            _ = try await one.transport.waitingAtGate(atLeast: 1)
            #expect(try await Self.claims(one.store) == [ticket.id.rawValue: one.outbox.claimant])

            // The other outbox starts: its lane waits for the claim's expiry
            try await two.outbox.start()
            await two.clock.sleepers(atLeast: 1)
            #expect(two.clock.nextDeadline == two.clock.now.advanced(by: .seconds(60)))
            #expect(two.transport.requests.isEmpty)

            // The first commits; the second wakes at the expiry and finds nothing
            one.transport.letThrough()
            #expect(try await ticket.outcome().get().status == 201)
            #expect(try await one.outbox.entries().isEmpty)
            date.advance(by: 60)
            two.clock.advance(by: .seconds(60))
            try await completes { await two.outbox.waitUntilIdle() }
            #expect(two.transport.requests.isEmpty, "sent once, by the first outbox")
        }
    }

    /// An attempt without an answer (a 503 for a one-shot outbox) releases its
    /// claim: the other outbox sends the entry at once, without waiting.
    @Test func anUnsettledAttemptReleasesItsClaim() async throws {
        try await withTwoSides(waitsForNetwork: false) { date, one, two in
            one.transport.respond(to: "/tasks", with: .status(503), .status(503), .status(503), .status(503))
            two.transport.respond(to: "/tasks", with: .status(201))
            let events = Recorder(one.controller.events())
            let ticket = try await one.outbox.send(CreateTask(payload: "after a 503"))
            // The controller's own retries wait out their delays on its clock.
            while let retry = try await events.next(where: { $0.kind == .retried || $0.kind.isTerminal }).delay {
                one.clock.advance(by: retry)
            }
            await one.outbox.waitUntilIdle()
            #expect(try await Self.claims(one.store) == [ticket.id.rawValue: nil])

            try await two.outbox.start()
            try await completes { await two.outbox.waitUntilIdle() }
            #expect(two.transport.requests.count == 1)
            #expect(try await two.outbox.entries().isEmpty)
            #expect(two.clock.elapsed == .zero, "it did not wait")
        }
    }

    /// A claim left by a sender that is gone. One that may still run (an
    /// outbox of this process that is live, or another process that exists)
    /// holds until it expires: the other outbox waits on its clock, then sends
    /// the entry. A claim whose process no longer exists, or whose outbox in
    /// this process is gone (its store closed), is taken over at once.
    @Test(arguments: ["live outbox", "process gone", "outbox gone"])
    func anExpiredClaimHandsTheEntryOver(holder: String) async throws {
        try await withTwoSides { date, one, two in
            two.transport.respond(to: "/tasks", with: .status(201))
            // An entry queued (nothing goes out), then claimed by the holder.
            _ = await one.controller.shutdown(grace: .zero)
            try await one.outbox.send(CreateTask(payload: "left behind"))
            await one.outbox.waitUntilIdle()
            let (claimant, pid) = switch holder {
            case "live outbox": (one.outbox.claimant, Outbox.processID)
            case "process gone": ("killed", Int64(Int32.max))
            default: ("closed", Outbox.processID)
            }
            let expires = date.now.addingTimeInterval(60).timeIntervalSince1970
            try await one.store.write { db in
                try db.execute(sql: "UPDATE depotOutbox SET claimedBy = ?, claimPID = ?, claimExpires = ?", arguments: [claimant, pid, expires])
            }

            try await two.outbox.start()
            let waits = holder == "live outbox"
            if waits {
                await two.clock.sleepers(atLeast: 1)
                #expect(two.transport.requests.isEmpty)
                date.advance(by: 60)
                two.clock.advance(by: .seconds(60))
            }
            try await completes { await two.outbox.waitUntilIdle() }
            #expect(two.transport.requests.count == 1)
            #expect(try await two.outbox.entries().isEmpty)
            #expect(two.clock.elapsed == (waits ? .seconds(60) : .zero))
        }
    }

    /// The claim is renewed before every attempt: a retry whose claim another
    /// outbox took over meanwhile (it had expired) does not go out. The lane
    /// waits for the new claim instead, and settles the entry only if it is
    /// still there.
    @Test func aRetryWhoseClaimWasTakenOverIsNotSent() async throws {
        try await withTwoSides { date, one, two in
            // A lost connection: the controller retries it after a backoff.
            one.transport.respond(to: "/tasks", with: .failure(DepotError(.connectionLost)), .status(201))
            let events = Recorder(one.controller.events())
            let ticket = try await one.outbox.send(CreateTask(payload: "taken over"))
            let retry = try #require(try await events.next(where: { $0.kind == .retried || $0.kind.isTerminal }).delay)
            // During the backoff the claim expires and another outbox claims the entry.
            date.advance(by: 61)
            let expires = date.now.addingTimeInterval(60).timeIntervalSince1970
            try await two.store.write { db in
                try db.execute(sql: "UPDATE depotOutbox SET claimedBy = ?, claimPID = ?, claimExpires = ?",
                               arguments: [two.outbox.claimant, Outbox.processID, expires])
            }
            one.clock.advance(by: retry)
            // The retry is not sent: the lane waits for the other's claim.
            // (It sleeps beside the deadline watch the first attempt armed.)
            await one.clock.sleepers(atLeast: 2)
            #expect(one.outbox.state.withLock { $0.pausing.contains("tasks") })
            #expect(one.transport.requests.count == 1)
            // The other outbox goes away without sending it: after the
            // expiry the first one sends it.
            try await two.store.write { db in
                try db.execute(sql: "UPDATE depotOutbox SET claimExpires = ?", arguments: [date.now.timeIntervalSince1970])
            }
            date.advance(by: 60)
            one.clock.advance(by: .seconds(60))
            #expect(try await ticket.outcome().get().status == 201)
            #expect(one.transport.requests.count == 2)
        }
    }

    /// A conflict's read of the server's record that outlasts the claim
    /// settles nothing: the other outbox took the edit over meanwhile and
    /// sent it, and the late answer neither overwrites the cached record nor
    /// sends the edit again.
    @Test func aConflictReadThatOutlastsItsClaimSettlesNothing() async throws {
        typealias Rename = VersionedEditTests.Rename
        try await withTwoSides(migrator: VersionedEditTests.migrator, types: [Rename.self]) { date, one, two in
            try await one.store.write { db in try VersionedEditTests.Contact(id: 1, name: "Ann", email: nil).insert(db) }
            // One meets a bare 412, and its read of the record waits at the gate.
            let record = #"{"id":1,"name":"Ann","email":"ann@example.com"}"#
            one.transport.respond(to: "/contacts/1", with: .status(412), ScriptedTransport.Answer.status(200, headers: ["ETag": "\"v2\""], body: Data(record.utf8)).gated)
            two.transport.respond(to: "/contacts/1", with: .status(200, headers: ["ETag": "\"v3\""], body: Data(#"{"id":1,"name":"Bo","email":null}"#.utf8)))
            let base = Rename.Fields(name: "Ann", email: nil)
            _ = try await one.outbox.send(Rename(payload: .init(id: 1, tag: "v1", base: base, mine: .init(name: "Bo", email: nil), query: [:], stuck: false)))
            _ = try await one.transport.waitingAtGate(atLeast: 1)

            // Meanwhile the claim expires, and the other outbox sends the edit.
            date.advance(by: 61)
            try await two.outbox.start()
            try await completes { await two.outbox.waitUntilIdle() }
            #expect(two.transport.requests.map(\.method) == [.patch])
            #expect(try await two.outbox.entries().isEmpty)

            // The late answer comes: nothing is written, nothing more is sent.
            one.transport.openGate()
            try await completes { await one.outbox.waitUntilIdle() }
            #expect(one.transport.requests.map(\.method) == [.patch, .get])
            let cached = try await one.store.read { db in try VersionedEditTests.Contact.fetchOne(db, key: 1) }
            #expect(cached?.name == "Bo")
            #expect(cached?.email == nil, "the late read's record was written over the other's commit")
            #expect(try await one.outbox.conflicts().isEmpty)
        }
    }
}
