import ArgumentParser
import Depot
import DepotStore
import Foundation
import SenbeiKit

struct EditContactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit-contact", abstract: "Edit a contact's fields (an empty value clears one, except the name).",
        discussion: """
            The edit is stored in the outbox with the version of the contact the cache holds, and works offline. \
            If someone else changed the contact since, changes to other fields are merged; a field you both changed \
            becomes a conflict (senbei conflicts).
            """)
    @OptionGroup var options: ServerOptions
    @Argument(help: "The contact's id.") var id: Int
    @Option(help: "The new name.") var name: String?
    @Option(help: "The new e-mail address.") var email: String?
    @Option(help: "The new company.") var company: String?
    @Option(help: "The new phone number.") var phone: String?

    func validate() throws {
        guard name != nil || email != nil || company != nil || phone != nil else {
            throw ValidationError("say what to change: --name, --email, --company or --phone")
        }
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--name cannot be blank") }
    }

    @MainActor func run() async throws {
        let changes = [("name", name), ("email", email), ("company", company), ("phone", phone)].compactMap { field, value in
            value.map { (field, $0.isEmpty ? nil : $0) }
        }
        try await Session.run(options) { session in
            let change = try await session.refusingPlainly("the edit of contact #\(id)") { () async throws(DepotError) in
                try await session.app.editContact(id: id) { fields throws(DepotError) in
                    var edited = fields
                    for (field, value) in changes { edited = try edited.setting(field, to: value) }
                    return edited
                }
            }
            try await session.finish(change, queued: "The edit of contact #\(id)") { contact in
                "Saved contact #\(contact.id) \(contact.name)" + (contact.version.map { " (version \($0))." } ?? ".")
            }
        }
    }
}

struct DeleteContactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-contact", abstract: "Delete a contact (kept if someone else changed it since the cache read it).")
    @OptionGroup var options: ServerOptions
    @Argument(help: "The contact's id.") var id: Int

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let change = try await session.refusingPlainly("the deletion of contact #\(id)") { () async throws(DepotError) in try await session.app.deleteContact(id: id) }
            do {
                try await session.finish(change, queued: "Deleting contact #\(id)") { _ in "Deleted contact #\(id)." }
            } catch let error as DepotError where error.code == .notFound {
                // What the user wanted: the contact is gone (and gone from the cache too).
                session.print(["Contact #\(id) was already deleted on the server."])
            } catch let error as DepotError where error.code == .conflict {
                throw Failure("Not deleted: someone changed contact #\(id) since this cache read it, so it was kept as they left it. Look at it, and delete it again if you still mean to.")
            }
        }
    }
}

struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts", abstract: "List the edits that met another user's change to the same field, or resolve one.",
        discussion: """
            Each line is #ID contact #N field: base → mine | theirs. --keep-mine ID sends your values again on the \
            server's version; --keep-theirs ID gives your edit up; --set ID FIELD VALUE sends your values with FIELD \
            set to VALUE (an empty VALUE clears it). Only the contact's own later changes wait for a conflict.
            """)
    @OptionGroup var options: ServerOptions
    @Option(name: .customLong("keep-mine"), help: ArgumentHelp("Resolve conflict ID with your values.", valueName: "ID")) var keepMine: Int64?
    @Option(name: .customLong("keep-theirs"), help: ArgumentHelp("Resolve conflict ID with the server's values.", valueName: "ID")) var keepTheirs: Int64?
    @Option(name: .customLong("set"), parsing: .upToNextOption, help: ArgumentHelp("Resolve conflict ID with your values and FIELD set to VALUE.", valueName: "ID FIELD VALUE"))
    var set: [String] = []

    func validate() throws {
        let chosen = [keepMine != nil, keepTheirs != nil, !set.isEmpty].filter { $0 }.count
        guard chosen <= 1 else { throw ValidationError("choose one of --keep-mine, --keep-theirs and --set") }
        if !set.isEmpty {
            guard set.count == 3, Int64(set[0].trimmingCharacters(in: CharacterSet(charactersIn: "#"))) != nil else {
                throw ValidationError("--set takes a conflict's ID, a field and a value: --set 4 email ann@example.com")
            }
            guard ContactFields.names.contains(set[1]) else {
                throw ValidationError("--set: \(set[1]) is not a contact field (\(ContactFields.names.joined(separator: ", ")))")
            }
        }
    }

    @MainActor func run() async throws {
        try await Session.run(options) { session in
            let app = session.app
            do {
                try await resolve(app, session)
            } catch let error as DepotError where error.code == .invalidRequest {
                // A wrong ID or field, in the library's own words.
                throw Failure(error.detail.map { "Cannot resolve: \($0)." } ?? "\(error)")
            }
        }
    }

    @MainActor private func resolve(_ app: SenbeiApp, _ session: Session) async throws {
        if let id = keepMine ?? keepTheirs {
            let entry = OutboxEntry.ID(rawValue: id)
            try await app.resolveConflict(entry, keeping: keepMine != nil ? .mine : .theirs)
            session.print([keepMine != nil ? "Conflict \(entry): your values go to the server again, on its version." : "Conflict \(entry): the server's values were kept."])
        } else if set.count == 3, let id = Int64(set[0].trimmingCharacters(in: CharacterSet(charactersIn: "#"))) {
            let entry = OutboxEntry.ID(rawValue: id)
            try await app.resolveConflict(entry, setting: set[1], to: set[2].isEmpty ? nil : set[2])
            session.print(["Conflict \(entry): your values, with \(set[1]) set, go to the server again, on its version."])
        } else {
            session.print(SenbeiPresentation.conflictLines(try await app.conflicts()))
            return
        }
        // Sent now (changes go out once signed in), if the server can be reached.
        do {
            _ = try await session.withLogin { try await app.login() }
        } catch let error as DepotError where [.offline, .connectionLost, .timedOut].contains(error.code) {
            session.print(["It will be sent when online."])
            return
        }
        await app.outbox.waitUntilIdle()
        let left = try await app.conflicts()
        if !left.isEmpty { session.print(SenbeiPresentation.conflictLines(left)) }
    }
}

extension Session {
    /// Queues a contact change with `make` (as ``store(_:_:)``); a change
    /// the app refuses before queueing it (nothing to change, a contact not
    /// on the server yet) ends the run with the app's own reason.
    func refusingPlainly<Record>(_ what: String, _ make: () async throws(DepotError) -> QueuedChange<Record>) async throws -> QueuedChange<Record> {
        do {
            return try await store(what, make)
        } catch let error as DepotError where error.code == .invalidRequest {
            throw Failure("Not saved: " + (error.detail ?? "\(error)") + ".")
        }
    }
}
