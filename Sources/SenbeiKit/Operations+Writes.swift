import Depot
import DepotStore
import Foundation
import GRDB

// The operations that change something on the server. Each writes what the
// server answered into the cache, so the lists read from the cache show the
// change at once. They finish at exit (a half-sent change is worse than a
// short wait) and fail fast offline (the default for non-GETs).

/// What the Senbei operations that change the server share: they wait for a
/// sign-in (category `.senbei`), finish at exit (a change on its way is not
/// abandoned), and read the server's error bodies, so a 422 says
/// `name can't be blank` and a 404 `there is no task 99`.
public protocol SenbeiChange: NetworkOperation {}

extension SenbeiChange {
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }
    /// A change finishes at exit.
    public var exitPolicy: ExitPolicy { .finish }

    /// Checks the status; 422 and 404 carry the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name)
    }
}

/// Posts a comment on a record: `POST /comments`.
///
/// For example:
///
/// ```swift
/// let comment = try await controller.perform(PostComment(on: Commentable(.contacts, 3), text: "Called, no answer"))
/// ```
public struct PostComment: SenbeiChange {
    /// The record commented on.
    public let subject: Commentable
    /// What to say.
    public let text: String

    /// Makes the operation.
    public init(on subject: Commentable, text: String) {
        self.subject = subject
        self.text = text
    }

    /// `POST comments` with `commentable_type`, `commentable_id` and `comment`.
    public var request: NetworkRequest {
        NetworkRequest(method: .post, target: .path("comments"),
                      body: .json(Wire.NewComment(commentableType: subject.kind.singular, commentableId: subject.id, comment: text), encoder: Wire.encoder))
    }


    /// Decodes the new comment and stores it.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> CRMComment {
        let comment = try Wire.decode(Wire.Comment.self, from: response).record
        try await context.requireStore(for: name).write { db in try comment.upsert(db) }
        return comment
    }
}

/// Deletes a comment: `DELETE /comments/:id`.
public struct DeleteComment: SenbeiChange {
    /// The comment's identifier.
    public let id: Int

    /// Makes the operation.
    public init(id: Int) {
        self.id = id
    }

    /// `DELETE comments/:id`.
    public var request: NetworkRequest { .delete("comments/\(id)") }


    /// Removes the comment from the cache.
    /// - Returns: The deleted comment's identifier.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int {
        let id = id
        try await context.requireStore(for: name).write { db in _ = try CRMComment.deleteOne(db, key: id) }
        return id
    }
}

/// Marks a task as done: `PUT /tasks/:id/complete`.
public struct MarkTaskDone: SenbeiChange {
    /// The task's identifier.
    public let id: Int

    /// Makes the operation.
    public init(id: Int) {
        self.id = id
    }

    /// `PUT tasks/:id/complete`.
    public var request: NetworkRequest { .put("tasks/\(id)/complete") }


    /// Decodes the task as the server now has it and stores it (done, so it
    /// leaves ``CRMTask/open``).
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> CRMTask {
        let task = try Wire.decode(Wire.Task.self, from: response).record
        try await context.requireStore(for: name).write { db in try task.upsert(db) }
        return task
    }
}

/// Creates a task: `POST /tasks`. With no due day it is due "as soon as possible".
public struct CreateTask: SenbeiChange {
    /// What to do (the task's `name` on the server; ``name`` is the operation's).
    public let title: String
    /// The day it is due, `yyyy-MM-dd`, or `nil`.
    public let due: String?

    /// Makes the operation.
    public init(name: String, due: String? = nil) {
        self.title = name
        self.due = due
    }

    /// `POST tasks` with `name` and `due`.
    public var request: NetworkRequest {
        NetworkRequest(method: .post, target: .path("tasks"), body: .json(Wire.NewTask(name: title, due: due), encoder: Wire.encoder))
    }


    /// Decodes the new task and stores it.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> CRMTask {
        let task = try Wire.decode(Wire.Task.self, from: response).record
        try await context.requireStore(for: name).write { db in try task.upsert(db) }
        return task
    }
}

/// Creates a contact: `POST /contacts`.
///
/// The server lists new contacts first, so the cache puts it before the first
/// contact of page 1 and counts it in every cached page's total, until page 1
/// is fetched again.
public struct CreateContact: SenbeiChange {
    /// The contact's name (``name`` is the operation's).
    public let contactName: String
    /// The e-mail address, if any.
    public let email: String?

    /// Makes the operation.
    public init(name: String, email: String? = nil) {
        self.contactName = name
        self.email = email
    }

    /// `POST contacts` with `name` and `email`.
    public var request: NetworkRequest {
        NetworkRequest(method: .post, target: .path("contacts"), body: .json(Wire.NewContact(name: contactName, email: email), encoder: Wire.encoder))
    }


    /// Decodes the new contact and stores it at the top of page 1.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> Entity {
        let wire = try Wire.decode(Wire.Entity.self, from: response)
        return try await context.requireStore(for: name).write { db in
            let first = try Int.fetchOne(db, sql: "SELECT MIN(position) FROM entity WHERE kind = ? AND page = 1", arguments: [EntityKind.contacts.rawValue]) ?? 0
            let contact = Entity(kind: .contacts, id: wire.id, name: wire.name, email: wire.email, company: wire.company, page: 1, position: first - 1)
            try contact.upsert(db)
            try db.execute(sql: "UPDATE entityPage SET total = total + 1 WHERE kind = ?", arguments: [EntityKind.contacts.rawValue])
            return contact
        }
    }
}
