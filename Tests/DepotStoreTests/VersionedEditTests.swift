import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing

/// A `VersionedEdit` of the library's own, with opaque entity tags, against
/// depot-server's contacts: the paths an app's server may take that Senbei's
/// does not (a `412` without the record, a record that keeps changing).
@Suite(.timeLimit(.minutes(2)))
struct VersionedEditTests {
    struct Contact: Codable, Sendable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "vcontact"
        var id: Int
        var name: String
        var email: String?
    }

    struct Wire: Decodable, Sendable {
        var id: Int
        var name: String
        var email: String?
    }

    /// Renames a contact from the entity tag it read.
    struct Rename: VersionedEdit {
        struct Fields: Codable, Sendable, Equatable, Hashable {
            var name: String
            var email: String?
        }
        struct Payload: Codable, Sendable {
            var id: Int
            var tag: String
            var base: Fields
            var mine: Fields
            /// `stale=bare`: the server's 412 says nothing of the record.
            var query: [String: String]
            /// Rebases keep the first tag: the server refuses every attempt.
            var stuck: Bool
            /// A `409` is this edit's conflict (its server's way of saying so).
            var recognizes409 = false
            /// The server's record never decodes (a server that changed its format).
            var unreadable = false
            /// Where the record is read after a bare 412 (default: the contact).
            var readPath: String?
        }
        static let typeName = "test.rename.v1"
        var payload: Payload
        init(payload: Payload) { self.payload = payload }

        var lane: String { "contact \(payload.id)" }
        var record: RecordKey? { RecordKey("contact", payload.id) }
        var baseVersion: RecordVersion? { RecordVersion(entityTag: payload.tag) }
        var base: Fields { payload.base }
        var mine: Fields { payload.mine }
        var request: NetworkRequest {
            var request = NetworkRequest.patch("contacts/\(payload.id)", json: ["name": payload.mine.name])
            request.query = payload.query.map { URLQueryItem(name: $0.key, value: $0.value) }
            return request
        }
        var currentRequest: NetworkRequest { .get(payload.readPath ?? "contacts/\(payload.id)") }

        func conflict(in response: NetworkResponse) -> EditConflictKind? {
            if payload.recognizes409, response.status == 409 { return .changed }
            return response.status == 412 ? .changed : nil
        }

        func rebased(onto version: RecordVersion, base: Fields, mine: Fields) -> Rename {
            var payload = payload
            if !payload.stuck { payload.tag = version.entityTag }
            (payload.base, payload.mine) = (base, mine)
            return Rename(payload: payload)
        }
        func serverRecord(from response: NetworkResponse) throws -> ServerRecord<Fields> {
            if payload.unreadable { throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not a contact")) }
            let wire = try response.decode(Wire.self)
            let version = try #require(RecordVersion(etagOf: response))
            return ServerRecord(version: version, fields: Fields(name: wire.name, email: wire.email))
        }
        func applyOptimistically(_ db: Database) throws {
            try db.execute(sql: "UPDATE vcontact SET name = ? WHERE id = ?", arguments: [payload.mine.name, payload.id])
        }
        func commit(_ response: NetworkResponse, _ db: Database) throws { try write(serverRecord(from: response), db) }
        func rollback(_ error: DepotError, _ db: Database) throws {
            try db.execute(sql: "UPDATE vcontact SET name = ? WHERE id = ?", arguments: [payload.base.name, payload.id])
        }
        func write(_ theirs: ServerRecord<Fields>?, _ db: Database) throws {
            guard let theirs else { return }
            try Contact(id: payload.id, name: theirs.fields.name, email: theirs.fields.email).upsert(db)
        }
    }

    /// Sends a request as another client would, with the server's credentials.
    struct Raw: NetworkOperation {
        var request: NetworkRequest
        func validate(_ response: NetworkResponse) throws {}
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("vcontact") { db in
            try db.create(table: "vcontact") { t in
                t.primaryKey("id", .integer)
                t.column("name", .text).notNull()
                t.column("email", .text)
            }
        }
        return migrator
    }

    /// Runs `body` with an outbox on a fresh store, contact 1 cached with its tag.
    /// With `tokens`, the controller signs in for OAuth 2 tokens instead of
    /// sending Basic credentials; `configure` has the last word.
    func withOutbox(
        tokens: Bool = false,
        configure: (inout NetworkController.Configuration) -> Void = { _ in },
        _ body: (DemoServer, NetworkController, Outbox, _ tag: String, _ contact: Rename.Fields, NotificationCenter) async throws -> Void
    ) async throws {
        try await DemoServer.withRunning(.init(seed: 7)) { server in
            try await StoreFixtures.withStore(migrator: Self.migrator) { store in
                let center = NotificationCenter()
                let endpoint = OAuth2TokenEndpoint(url: server.baseURL.appending(path: "oauth/token"), clientID: "tests")
                let authenticator = tokens ? TokenAuthenticator(for: server.baseURL, refresher: .oauth2(endpoint), refreshWindow: .zero, exempting: [endpoint.url]) : nil
                var configuration = NetworkController.Configuration(
                    baseURL: server.baseURL, transport: AsyncHTTPClientTransport(),
                    adapters: tokens ? [] : [Credentials.basic(username: "admin", password: "secret", for: server.baseURL)],
                    authenticator: authenticator,
                    observability: .init(notificationCenter: center))
                configuration.store = store
                configure(&configuration)
                let controller = NetworkController(configuration: configuration)
                if let authenticator {
                    await authenticator.signIn(try await controller.perform(endpoint.passwordGrant(username: "admin", password: "secret")))
                }
                let outbox = Outbox(store: store, controller: controller, types: [Rename.self])
                let read = try await controller.perform(Raw(request: .get("contacts/1")))
                let wire = try read.decode(Wire.self)
                let tag = try #require(RecordVersion(etagOf: read)).entityTag
                try await store.write { db in try Contact(id: 1, name: wire.name, email: wire.email).insert(db) }
                try await body(server, controller, outbox, tag, Rename.Fields(name: wire.name, email: wire.email), center)
                _ = await controller.shutdown(grace: .zero)
            }
        }
    }

    /// Another client changes contact 1's e-mail.
    func changeEmailElsewhere(_ controller: NetworkController, to email: String) async throws {
        let read = try await controller.perform(Raw(request: .get("contacts/1")))
        let tag = try #require(read.headers["ETag"])
        let written = try await controller.perform(Raw(request: .patch("contacts/1", json: ["email": email], headers: ["If-Match": tag])))
        #expect(written.status == 200)
    }

    @Test func a412WithoutTheRecordIsAnsweredByFetchingIt() async throws {
        try await withOutbox { server, controller, outbox, tag, contact, _ in
            try await changeEmailElsewhere(controller, to: "elsewhere@b.example")
            let gets = server.currentStats.requests["GET /contacts/{id}"] ?? server.currentStats.requests.filter { $0.key.hasPrefix("GET /contacts/") }.values.reduce(0, +)
            var mine = contact
            mine.name = "Renamed"
            let ticket = try await outbox.send(Rename(payload: .init(id: 1, tag: tag, base: contact, mine: mine, query: ["stale": "bare"], stuck: false)))
            let answer = try await ticket.outcome().get()
            #expect(answer.status == 200)
            // The bare 412, one GET for the record, then the rebased PATCH.
            #expect(server.currentStats.requests.filter { $0.key.hasPrefix("PATCH /contacts/") }.values.reduce(0, +) == 3)
            #expect(server.currentStats.requests.filter { $0.key.hasPrefix("GET /contacts/") }.values.reduce(0, +) == gets + 1)
            let cached = try await outbox.store.read { db in try Contact.fetchOne(db, key: 1) }
            #expect(cached?.name == "Renamed" && cached?.email == "elsewhere@b.example")
        }
    }

    @Test func aRecordThatKeepsRefusingIsKeptForTheUserAfterTheRebaseLimit() async throws {
        try await withOutbox { server, _, outbox, tag, contact, center in
            let (notified, told) = AsyncStream.makeStream(of: OutboxChange.Step.self)
            let observer = center.addObserver(forName: .depotOutboxChanged, object: nil, queue: nil) { note in
                if let step = (note.userInfo?[OutboxChange.UserInfoKey.change] as? OutboxChange)?.step { told.yield(step) }
            }
            defer { center.removeObserver(observer) }
            let changes = outbox.changes()
            var mine = contact
            mine.name = "Renamed"
            // A tag the server never had, kept by every rebase.
            _ = tag
            let entry = try await outbox.send(Rename(payload: .init(id: 1, tag: "\"0\"", base: contact, mine: mine, query: [:], stuck: true))).id
            var steps: [OutboxChange.Step] = []
            for await change in changes where change.entry == entry.rawValue {
                if let step = change.step { steps.append(step) }
                if change.step == .conflicted { break }
            }
            #expect(steps.filter { $0 == .rebased }.count == Outbox.rebaseLimit)
            #expect(server.currentStats.requests.filter { $0.key.hasPrefix("PATCH /contacts/") }.values.reduce(0, +) == Outbox.rebaseLimit + 1)
            let conflict = try #require(try await outbox.conflicts().first)
            #expect(conflict.id == entry)
            #expect(conflict.fields == [FieldConflict(field: "name", base: contact.name, mine: "Renamed", theirs: contact.name)])
            // The notification says so too (waited for: it is posted after `changes()` hears).
            var heard = false
            for await step in notified where step == .conflicted {
                heard = true
                break
            }
            #expect(heard)
            // Resolved with the server's: the cached name is the server's again.
            try await outbox.resolveConflict(entry, keeping: .theirs)
            #expect(try await outbox.store.read { db in try Contact.fetchOne(db, key: 1) }?.name == contact.name)
            #expect(try await outbox.entries().isEmpty)
        }
    }

    @Test(arguments: [true, false])
    func a409IsAConflictOnlyWhereTheEditRecognizesIt(_ recognized: Bool) async throws {
        try await withOutbox { _, controller, outbox, tag, contact, _ in
            try await changeEmailElsewhere(controller, to: "elsewhere@b.example")
            var mine = contact
            mine.name = "Renamed"
            let edit = Rename(payload: .init(id: 1, tag: tag, base: contact, mine: mine, query: ["stale": "409"], stuck: false, recognizes409: recognized))
            let answer = await (try outbox.send(edit)).outcome()
            let cached = try await outbox.store.read { db in try Contact.fetchOne(db, key: 1) }
            if recognized {
                // Merged with the other change, and sent again on its version.
                #expect(try answer.get().status == 200)
                #expect(cached?.name == "Renamed")
            } else {
                // Any other refusal: rolled back, as before versions.
                #expect(throws: DepotError.self) { try answer.get() }
                #expect((try? answer.get()) == nil && answer.failureStatus == 409)
                #expect(cached?.name == contact.name)
            }
        }
    }
}

extension VersionedEditTests {
    @Test func aConflictWhoseRecordCannotBeReadStopsItsEntryInsteadOfRetrying() async throws {
        try await withOutbox { server, controller, outbox, tag, contact, _ in
            try await changeEmailElsewhere(controller, to: "elsewhere@b.example")
            var mine = contact
            mine.name = "Renamed"
            let edit = Rename(payload: .init(id: 1, tag: tag, base: contact, mine: mine, query: ["stale": "bare"], stuck: false, unreadable: true))
            let answer = await (try outbox.send(edit)).outcome()
            #expect(answer.failureCode == .decoding)
            // Stopped, once: the bare 412 and one read of the record, no more.
            #expect(server.currentStats.requests.filter { $0.key.hasPrefix("PATCH /contacts/") }.values.reduce(0, +) == 2)
            let entries = try await outbox.entries()
            #expect(entries.map(\.state) == [.failed])
            #expect(entries.first?.lastError?.contains("cannot be read") == true)
            #expect(try await outbox.conflicts().isEmpty)
            // The user's change is still what the cache shows, for a retry or a discard.
            #expect(try await outbox.store.read { db in try Contact.fetchOne(db, key: 1) }?.name == "Renamed")
        }
    }
}

/// Sends the first read of a contact, once armed, with credentials the server
/// refuses: a sign-in that lapsed between an edit's 412 and the read of the
/// record. (`Credentials` leaves a request that has its own `Authorization`.)
final class LapsedSignIn: RequestAdapter {
    private let armed = Mutex(false)

    func arm() { armed.withLock { $0 = true } }

    func adapt(_ request: inout TransportRequest) async throws {
        guard request.method == .get, request.url.path.hasPrefix("/contacts/"), armed.withLock({ armed in
            defer { armed = false }
            return armed
        }) else { return }
        request.headers["Authorization"] = "Basic \(Data("admin:expired".utf8).base64EncodedString())"
    }
}

extension VersionedEditTests {
    /// A 401 on the read that a bare 412 calls for holds the lane, as a 401
    /// on the edit itself does: the edit is neither failed nor rolled back,
    /// and goes through (merged) once credentials are back.
    @Test func aSignInRefusedWhileReadingTheServersRecordHoldsTheLane() async throws {
        let lapsed = LapsedSignIn()
        try await withOutbox(configure: { $0.adapters.insert(lapsed, at: 0) }) { server, controller, outbox, tag, contact, _ in
            try await changeEmailElsewhere(controller, to: "elsewhere@b.example")
            lapsed.arm()
            var mine = contact
            mine.name = "Renamed"
            let patches = patchCount(server)
            let changes = outbox.changes()
            let ticket = try await outbox.send(Rename(payload: .init(id: 1, tag: tag, base: contact, mine: mine, query: ["stale": "bare"], stuck: false)))
            #expect(await firstStop(of: ticket, in: changes).step == .held)
            #expect(try await outbox.entries().map(\.state) == [.pending])
            #expect(try await outbox.snapshot().heldLanes == ["contact 1"])
            #expect(try await outbox.store.read { db in try Contact.fetchOne(db, key: 1) }?.name == "Renamed")

            await outbox.resumeHeld()
            let answer = try await ticket.outcome().get()
            #expect(answer.status == 200)
            let cached = try await outbox.store.read { db in try Contact.fetchOne(db, key: 1) }
            #expect(cached?.name == "Renamed" && cached?.email == "elsewhere@b.example")
            // The bare 412 before the hold; after it, the bare 412 again and the merged edit.
            #expect(patchCount(server) - patches == 3)
        }
    }

    /// A 401 to that read that a new token does not cure (a token without
    /// the scope to read) holds the lane after one more try: a refresh
    /// during the attempt earns the entry one retry, not a loop of them.
    @Test func aReadThatNewTokensDoNotCureHoldsTheLaneAfterOneRetry() async throws {
        try await withOutbox(tokens: true) { server, controller, outbox, tag, contact, _ in
            try await changeEmailElsewhere(controller, to: "elsewhere@b.example")
            var mine = contact
            mine.name = "Renamed"
            let changes = outbox.changes()
            let ticket = try await outbox.send(Rename(payload: .init(id: 1, tag: tag, base: contact, mine: mine, query: ["stale": "bare"], stuck: false, readPath: "faults/status/401")))
            let stop = await firstStop(of: ticket, in: changes, sendsAtMost: 5)
            #expect(stop.step == .held)
            #expect(stop.sends == 2, "sent \(stop.sends) times")
            #expect(try await outbox.entries().map(\.state) == [.pending])
        }
    }

    /// A 429 or 503 to that read that the controller's own retries did not
    /// get past leaves the entry queued, to go again later, as the same
    /// answer to the edit would.
    @Test(arguments: [429, 503])
    func aReadThatIsRefusedForNowIsTriedAgainLater(status: Int) async throws {
        try await withOutbox(configure: { $0.retries.policy = .never }) { _, controller, outbox, tag, contact, _ in
            try await changeEmailElsewhere(controller, to: "elsewhere@b.example")
            var mine = contact
            mine.name = "Renamed"
            let changes = outbox.changes()
            let ticket = try await outbox.send(Rename(payload: .init(id: 1, tag: tag, base: contact, mine: mine, query: ["stale": "bare"], stuck: false, readPath: "faults/status/\(status)")))
            #expect(await firstStop(of: ticket, in: changes, orStep: .willRetry).step == .willRetry)
            #expect(try await outbox.entries().map(\.state) == [.pending])
        }
    }

    /// The PATCHes depot-server has answered.
    func patchCount(_ server: DemoServer) -> Int {
        server.currentStats.requests.filter { $0.key.hasPrefix("PATCH /contacts/") }.values.reduce(0, +)
    }

    /// The first step that stops `ticket`'s entry (held, failed, rolled back,
    /// committed, or `orStep`), and how many times it was sent until then; it
    /// stops counting at `sendsAtMost + 1` sends.
    func firstStop(of ticket: OutboxTicket, in changes: OutboxChanges, orStep: OutboxChange.Step? = nil, sendsAtMost: Int = .max) async -> (step: OutboxChange.Step?, sends: Int) {
        var sends = 0
        for await change in changes where change.entry == ticket.id.rawValue {
            guard let step = change.step else { continue }
            if step == .sending { sends += 1 }
            if [.held, .failed, .rolledBack, .committed, orStep].contains(step) || sends > sendsAtMost { return (step, sends) }
        }
        return (nil, sends)
    }

    /// A 403 to that read is no lapsed sign-in: the entry stops as failed,
    /// blocking nothing, its change kept for a retry or a discard.
    @Test func aForbiddenReadOfTheServersRecordStopsItsEntry() async throws {
        try await withOutbox { _, controller, outbox, tag, contact, _ in
            try await changeEmailElsewhere(controller, to: "elsewhere@b.example")
            var mine = contact
            mine.name = "Renamed"
            let edit = Rename(payload: .init(id: 1, tag: tag, base: contact, mine: mine, query: ["stale": "bare"], stuck: false, readPath: "faults/status/403"))
            let changes = outbox.changes()
            let ticket = try await outbox.send(edit)
            #expect(await firstStop(of: ticket, in: changes).step == .failed)
            #expect(await ticket.outcome().failureStatus == 403)
            #expect(try await outbox.entries().map(\.state) == [.failed])
            #expect(try await outbox.snapshot().heldLanes.isEmpty)
            #expect(try await outbox.store.read { db in try Contact.fetchOne(db, key: 1) }?.name == "Renamed")
        }
    }
}

extension Result where Failure == DepotError {
    /// The status of the server's refusal, if that is what this is.
    var failureStatus: Int? {
        if case .failure(let error) = self { return error.status }
        return nil
    }

    /// The code of the failure, if that is what this is.
    var failureCode: DepotError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}
