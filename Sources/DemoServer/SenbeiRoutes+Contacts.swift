import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

extension SenbeiRoutes {
    /// The contact routes: create, read one, edit and delete, with versions.
    ///
    /// Every contact has a `version` (1 when made, one more on every change),
    /// and its answers carry it as a strong `ETag: "<version>"`. A `PATCH` or
    /// `DELETE` must name the version it was made from in `If-Match`; the
    /// checks come in this order:
    ///
    /// | the request | the answer |
    /// |---|---|
    /// | an unknown or deleted contact | 404 `{"errors": {"base": ["there is no contact N"]}}` |
    /// | no `If-Match` | 428 `{"errors": {"if_match": ["…"]}}` |
    /// | an `If-Match` that is not the version | 412, the contact as it is now, and its `ETag` |
    /// | a `PATCH` body that is not a change (``ContactPatch``) | 422 `{"errors": {"field": ["…"]}}` |
    /// | otherwise | `PATCH`: 200, the new contact (version + 1), its `ETag`; `DELETE`: 204 |
    ///
    /// Every write honours `Idempotency-Key` (``IdempotencyKeys``), except with
    /// `?idempotency=ignored`: a server that does not, for tests that prove a
    /// client sends nothing twice. With `?stale=bare`, a `412` has no body (a
    /// server that does not say what the contact is now, so the client must
    /// ask); with `?stale=409`, a stale version is a `409 Conflict` with the
    /// contact (a server that signals conflicts its own way). Every change is
    /// in the CRM's change feed.
    static func addContacts(to crm: RouterGroup<DemoRequestContext>, keys: IdempotencyKeys, store: ChangeFeed<Store, Change>) {
        crm.post("/contacts") { request, _ in
            try await keys.respond(to: request) { data in
                struct NewContact: Decodable { var name: String?; var email: String? }
                let body = try? decode(NewContact.self, data)
                var errors: [String: [String]] = [:]
                if (body?.name ?? "").trimmingCharacters(in: .whitespaces).isEmpty { errors["name"] = ["can't be blank"] }
                if let email = body?.email, !email.contains("@") { errors["email"] = ["is invalid"] }
                guard errors.isEmpty, let name = body?.name else { return try invalid(errors) }
                let contact = store.write { store, log in store.addContact(name: name, email: body?.email, log: &log) }
                return try json(contact, status: .created, eTag: true)
            }
        }
        crm.get("/contacts/:id") { request, context in
            let id = context.parameters.get("id", as: Int.self)
            guard let contact = id.flatMap({ id in store.read { store, _ in store.contact(id: id) } }) else {
                return try noContact(context)
            }
            if let tags = request.headers[values: .ifNoneMatch].nonEmpty, VersionTag.list(tags, names: contact.version, weakly: true) {
                return Response(status: .notModified, headers: [.eTag: eTag(contact.version)])
            }
            return try json(contact, eTag: true)
        }
        crm.patch("/contacts/:id") { request, context in
            try await keys.respond(to: request, deduplicating: deduplicates(request)) { data in
                let write = ContactWrite.edit(json: data)
                return try answer(store.write { store, log in
                    store.writeContact(id: context.parameters.get("id", as: Int.self), ifMatch: request.headers[values: .ifMatch], write, log: &log)
                }, context, stale: request.uri.queryParameters.get("stale").map { String($0) })
            }
        }
        crm.delete("/contacts/:id") { request, context in
            try await keys.respond(to: request, deduplicating: deduplicates(request)) { _ in
                try answer(store.write { store, log in
                    store.writeContact(id: context.parameters.get("id", as: Int.self), ifMatch: request.headers[values: .ifMatch], .delete, log: &log)
                }, context, stale: request.uri.queryParameters.get("stale").map { String($0) })
            }
        }
    }

    /// A contact version as a strong entity tag, quotes included: `"3"`.
    static func eTag(_ version: Int) -> String { VersionTag.string(version) }

    /// `contact` as JSON; with `eTag`, its version as the `ETag`.
    static func json(_ contact: Entity, status: HTTPResponse.Status = .ok, eTag tagged: Bool) throws -> Response {
        var response = try json(contact, status: status)
        if tagged { response.headers[.eTag] = eTag(contact.version) }
        return response
    }

    /// Whether a contact write honours `Idempotency-Key`: it does unless the
    /// query says `idempotency=ignored`.
    static func deduplicates(_ request: Request) -> Bool {
        request.uri.queryParameters.get("idempotency") != "ignored"
    }

    private static func noContact(_ context: DemoRequestContext) throws -> Response {
        let id = context.parameters.get("id") ?? ""
        return try invalidStatus(.notFound, ["base": ["there is no contact \(id)"]])
    }

    /// - Parameter stale: How a stale version is answered: `bare` (a 412
    ///   without the contact), `409`, or the contract's 412 with it.
    private static func answer(_ outcome: ContactWriteOutcome, _ context: DemoRequestContext, stale: String?) throws -> Response {
        switch outcome {
        case .notFound:
            try noContact(context)
        case .preconditionRequired:
            try invalidStatus(.preconditionRequired, ["if_match": [#"is required: the contact's ETag, "<version>", as GET /contacts/:id answers it"#]])
        case .stale(let current) where stale == "bare":
            Response(status: .preconditionFailed, headers: [.eTag: eTag(current.version)])
        case .stale(let current) where stale == "409":
            try json(current, status: .conflict, eTag: true)
        case .stale(let current):
            try json(current, status: .preconditionFailed, eTag: true)
        case .invalid(let errors):
            try invalid(errors)
        case .edited(let contact):
            try json(contact, eTag: true)
        case .deleted:
            Response(status: .noContent)
        }
    }
}

/// A contact write, once its body has been read: an edit, a body that is
/// not one (its field errors), or a delete.
enum ContactWrite: Sendable {
    case edit(ContactPatch)
    case invalid([String: [String]])
    case delete

    /// The edit a `PATCH` body asks for, or its field errors.
    static func edit(json data: ByteBuffer) -> ContactWrite {
        switch Result(catching: { () throws(ContactPatch.FieldErrors) in try ContactPatch(json: data) }) {
        case .success(let patch): .edit(patch)
        case .failure(let failure): .invalid(failure.errors)
        }
    }
}

/// What a contact write came to, in the order the checks are made.
enum ContactWriteOutcome: Sendable, Equatable {
    /// No such contact, or a deleted one.
    case notFound
    /// No `If-Match`.
    case preconditionRequired
    /// `If-Match` is not the contact's version: the contact as it is now.
    case stale(SenbeiRoutes.Entity)
    /// The body is not a change: field errors.
    case invalid([String: [String]])
    /// The contact as edited.
    case edited(SenbeiRoutes.Entity)
    /// The contact is gone.
    case deleted
}

extension SenbeiRoutes.Store {
    /// The contact `id`, or `nil` when there is none (or it was deleted).
    func contact(id: Int) -> SenbeiRoutes.Entity? {
        lists["contacts"]?.first { $0.id == id }
    }

    /// Edits or deletes the contact `id` if `ifMatch` (the `If-Match` field
    /// values) names its version: one more version and a `contact` change, or
    /// a `delete-contact` change, each with its activity.
    mutating func writeContact(id: Int?, ifMatch: [String], _ write: ContactWrite, log: inout ChangeLog<SenbeiRoutes.Change>) -> ContactWriteOutcome {
        guard let id, let index = lists["contacts"]?.firstIndex(where: { $0.id == id }), let current = lists["contacts"]?[index] else { return .notFound }
        guard let tags = ifMatch.nonEmpty else { return .preconditionRequired }
        guard VersionTag.list(tags, names: current.version, weakly: false) else { return .stale(current) }
        switch write {
        case .invalid(let errors):
            return .invalid(errors)
        case .edit(let patch):
            nextID += 1
            var edited = patch.applied(to: current)
            edited.version = current.version + 1
            lists["contacts"]?[index] = edited
            activities.insert(SenbeiRoutes.Activity(id: nextID, action: "updated", subject: "contact \(edited.name)"), at: 0)
            log.record(.contact(edited))
            return .edited(edited)
        case .delete:
            nextID += 1
            lists["contacts"]?.remove(at: index)
            activities.insert(SenbeiRoutes.Activity(id: nextID, action: "deleted", subject: "contact \(current.name)"), at: 0)
            log.record(.deleteContact(id: id))
            return .deleted
        }
    }
}

extension Array where Element == String {
    /// The field values, or `nil` when there are none or all are blank.
    fileprivate var nonEmpty: [String]? {
        contains { !$0.trimmingCharacters(in: .whitespaces).isEmpty } ? self : nil
    }
}
