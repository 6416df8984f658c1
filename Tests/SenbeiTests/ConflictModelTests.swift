import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// Two writers, each with its own cache file, making random edits of the
/// same three contacts: online and offline, syncing, refreshing and
/// resolving conflicts in random order, against one depot-server.
///
/// The invariant: nothing a writer saved is lost without a conflict record
/// naming it. Read from the server's change feed, which holds every version
/// of every contact:
/// - no lost update: every field a version changed was changed by an edit
///   that had seen the value it replaced (its base), or by the user
///   resolving a conflict that showed it;
/// - nothing dropped: at the end every writer resolves what conflicts remain
///   keeping its own values and sends what is queued; then every value any
///   edit saved reached the server, unless the user, shown the conflict,
///   chose to give it up.
@Suite(.timeLimit(.minutes(3)))
@MainActor
struct ConflictModelTests {
    /// One edit: one field of one contact set to a value no other edit uses.
    struct Saved: Hashable {
        var writer: String
        var entry: OutboxEntry.ID
        /// The value the writer's cache showed before the edit.
        var base: String?
        var contact: Int
        var field: String
        var value: String
    }

    static let fields = ["email", "company", "phone"]

    @Test(arguments: Array(11...22) as [UInt64])
    func twoWritersLoseNoEditWithoutAConflictNamingIt(seed: UInt64) async throws {
        var random = SeededGenerator(seed: seed)
        try await withSenbei { f in
            try await ConflictTests().withSecondClient(f) { b in
                try await f.app.login()
                let writers: [(name: String, app: SenbeiApp)] = [("a", f.app), ("b", b)]
                for writer in writers { _ = try await writer.app.loadPage(.contacts) }
                let initial = try await f.app.loadPage(.contacts).items.filter { $0.id <= 3 }
                var saved: [Saved] = []
                // The fields of entries the user resolved keeping mine or
                // setting a value: the conflict showed them theirs.
                var seenByUser: Set<String> = []
                // What the user chose to give up when shown a conflict: (entry, field).
                var givenUp: Set<String> = []
                var counts: [String: Int] = [:]

                for step in 0..<80 {
                    let (name, app) = writers[Int(random.next() % 2)]
                    switch random.next() % 6 {
                    case 0, 1, 2:
                        // An edit, online or (one time in three) offline.
                        let contact = 1 + Int(random.next() % 3)
                        let field = Self.fields[Int(random.next() % 3)]
                        let value = Self.value(field, "\(name)\(step)")
                        let offline = random.next() % 3 == 0
                        let base = try await Self.cachedValue(of: field, contact: contact, in: app.store)
                        let entry: OutboxEntry.ID
                        if offline {
                            entry = try await withApp(store: app.store, server: URL(string: "http://127.0.0.1:9")!, date: f.date) { offlineApp in
                                try await offlineApp.editContact(id: contact) { fields throws(DepotError) in try fields.setting(field, to: value) }.entry
                            }
                        } else {
                            entry = try await app.editContact(id: contact) { fields throws(DepotError) in try fields.setting(field, to: value) }.entry
                            await app.outbox.waitUntilIdle()
                        }
                        saved.append(Saved(writer: name, entry: entry, base: base, contact: contact, field: field, value: value))
                        counts[offline ? "offline edits" : "online edits", default: 0] += 1
                    case 3:
                        try await app.start()
                        await app.outbox.waitUntilIdle()
                        counts["syncs", default: 0] += 1
                    case 4:
                        _ = try await app.loadPage(.contacts, refresh: true)
                        counts["refreshes", default: 0] += 1
                    default:
                        // The user resolves a conflict, one of three ways.
                        guard let conflict = try await app.conflicts().randomElement(using: &random) else { continue }
                        switch random.next() % 3 {
                        case 0:
                            try await app.resolveConflict(conflict.id, keeping: .mine)
                            for shown in conflict.fields { seenByUser.insert("\(name) \(conflict.id) \(shown.field)") }
                        case 1:
                            try await app.resolveConflict(conflict.id, keeping: .theirs)
                            for edit in saved where edit.writer == name && edit.entry == conflict.id { givenUp.insert("\(name) \(edit.entry) \(edit.field)") }
                        default:
                            let field = Self.fields[Int(random.next() % 3)]
                            let value = Self.value(field, "\(name)\(step)r")
                            try await app.resolveConflict(conflict.id, setting: field, to: value)
                            givenUp.insert("\(name) \(conflict.id) \(field)")
                            for shown in conflict.fields { seenByUser.insert("\(name) \(conflict.id) \(shown.field)") }
                            seenByUser.insert("\(name) \(conflict.id) \(field)")
                            let contact = Int(conflict.record?.id ?? "") ?? 0
                            saved.append(Saved(writer: name, entry: conflict.id, base: nil, contact: contact, field: field, value: value))
                        }
                        await app.outbox.waitUntilIdle()
                        counts["resolutions", default: 0] += 1
                    }
                    // Whatever happened, a conflict kept is named, with the fields both changed.
                    for writer in writers {
                        for conflict in try await writer.app.conflicts() {
                            #expect(!conflict.fields.isEmpty, "a conflict of \(writer.name) names no field: \(conflict)")
                        }
                    }
                }
                var kept = 0
                for writer in writers { kept += try await writer.app.conflicts().count }

                // The end: every writer keeps its values and sends everything.
                for _ in 0..<10 {
                    var left = 0
                    for writer in writers {
                        try await writer.app.start()
                        await writer.app.outbox.waitUntilIdle()
                        for conflict in try await writer.app.conflicts() {
                            try await writer.app.resolveConflict(conflict.id, keeping: .mine)
                            for shown in conflict.fields { seenByUser.insert("\(writer.name) \(conflict.id) \(shown.field)") }
                        }
                        await writer.app.outbox.waitUntilIdle()
                        left += try await writer.app.outbox.entries().count
                    }
                    if left == 0 { break }
                }
                for writer in writers { #expect(try await writer.app.outbox.entries().isEmpty, "\(writer.name) still has queued edits") }

                // No lost update: each change of a field, version by version,
                // comes from an edit that had seen the value it replaced.
                let history = try await Self.contactHistory(via: b)
                var overwritten: [String] = []
                for contact in initial {
                    var previous = Version(id: contact.id, email: contact.email, company: contact.company, phone: contact.phone)
                    for version in history where version.id == contact.id {
                        for field in Self.fields where version.value(of: field) != previous.value(of: field) {
                            let new = version.value(of: field)
                            guard let edit = saved.first(where: { $0.contact == contact.id && $0.field == field && $0.value == new }) else {
                                overwritten.append("contact \(contact.id) \(field): \(previous.value(of: field) ?? "nil") → \(new ?? "nil") by no edit")
                                continue
                            }
                            if edit.base != previous.value(of: field), !seenByUser.contains("\(edit.writer) \(edit.entry) \(field)") {
                                overwritten.append("contact \(contact.id) \(field): \(previous.value(of: field) ?? "nil") → \(new ?? "nil") by \(edit.writer)'s edit \(edit.entry), which had seen \(edit.base ?? "nil")")
                            }
                        }
                        previous = version
                    }
                }
                #expect(overwritten.isEmpty, "lost updates: \(overwritten)")

                // Every saved value reached the server, unless given up by the user.
                var lost: [Saved] = []
                for edit in saved where !givenUp.contains("\(edit.writer) \(edit.entry) \(edit.field)") {
                    if !history.contains(where: { $0.id == edit.contact && $0.value(of: edit.field) == edit.value }) { lost.append(edit) }
                }
                #expect(lost.isEmpty, "lost without a conflict naming them: \(lost)")
                // And both caches, refreshed, show the server's contacts.
                var server: [Entity] = []
                for id in 1...3 { server.append(try await b.controller.perform(FetchContact(id: id))) }
                for writer in writers {
                    let page = try await writer.app.loadPage(.contacts, refresh: true)
                    for contact in server {
                        let cached = page.items.first { $0.id == contact.id }
                        #expect(cached.map(ContactFields.init) == ContactFields(contact), "\(writer.name)'s cache differs from the server for contact \(contact.id)")
                    }
                }
                print("conflict model, seed \(seed): \(saved.count) edits (\(counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))), \(kept) conflicts kept at the end of the random steps, \(givenUp.count) values given up by the user")
            }
        }
    }

    /// The value of `field` of `contact` in a writer's cache.
    static func cachedValue(of field: String, contact: Int, in store: Store) async throws -> String? {
        let row = try await store.read { db in try Entity.fetchOne(db, key: ["kind": EntityKind.contacts.rawValue, "id": contact]) }
        return row.map { Version(id: $0.id, email: $0.email, company: $0.company, phone: $0.phone) }?.value(of: field)
    }

    static func value(_ field: String, _ tag: String) -> String {
        switch field {
        case "email": "\(tag)@writers.example"
        case "company": "\(tag) Ltd"
        default: "555-\(tag)"
        }
    }

    /// A contact as one change of the server's feed had it.
    struct Version: Decodable {
        var id: Int
        var email: String?
        var company: String?
        var phone: String?

        func value(of field: String) -> String? {
            switch field {
            case "email": email
            case "company": company
            default: phone
            }
        }
    }

    /// Every version of every contact the server's change feed holds.
    static func contactHistory(via app: SenbeiApp) async throws -> [Version] {
        struct Page: Decodable {
            struct Entry: Decodable { var contact: Version? }
            var changes: [Entry]
            var cursor: Int
            var more: Bool
        }
        struct Changes: NetworkOperation {
            var since: Int
            var request: NetworkRequest { .get("crm/changes", query: ["since": "\(since)", "limit": "100"]) }
            func process(_ response: NetworkResponse, context: OperationContext) async throws -> Page {
                let decoder = JSONDecoder()
                decoder.keyDecodingStrategy = .convertFromSnakeCase
                return try response.decode(Page.self, using: decoder)
            }
        }
        var versions: [Version] = []
        var since = 0
        while true {
            let page = try await app.controller.perform(Changes(since: since))
            versions += page.changes.compactMap(\.contact)
            guard page.more, page.cursor > since else { return versions }
            since = page.cursor
        }
    }
}
