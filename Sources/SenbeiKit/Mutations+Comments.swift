import Depot
import DepotStore
import Foundation
import GRDB

/// Posts a comment on a record: `POST /comments`.
///
/// The comment shows at once after the record's others, with its temporary
/// identifier and ``PendingChange/create``. Comments on one record share a
/// lane, so they reach the server in the order they were written.
///
/// For example:
///
/// ```swift
/// let change = try await app.postComment(on: Commentable(.contacts, 3), text: "Called, no answer")
/// ```
public struct PostComment: SenbeiMutation {
    /// What is stored.
    public struct Payload: Codable, Sendable, Hashable {
        /// The temporary identifier (negative).
        public var localID: Int
        /// The kind of the record commented on.
        public var kind: EntityKind
        /// The identifier of the record commented on.
        public var id: Int
        /// What to say.
        public var text: String
    }

    /// `senbei.newComment.v1`.
    public static let typeName = "senbei.newComment.v1"
    /// ``senbeiDidPostComment``.
    public static let didCommit = Notification.Name.senbeiDidPostComment
    /// What is stored.
    public var payload: Payload

    /// Rebuilds the change from its stored payload.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// Makes the change; `localID` is the comment's temporary identifier (negative, unique).
    public init(on subject: Commentable, text: String, localID: Int) {
        self.payload = Payload(localID: localID, kind: subject.kind, id: subject.id, text: text)
    }

    /// The record commented on.
    public var subject: Commentable { Commentable(payload.kind, payload.id) }
    public var localID: Int { payload.localID }
    /// `comment on contact 3`.
    public var summary: String { "comment on \(subject)" }
    /// The lane of the record's comments.
    public var lane: String { "senbei.comments.\(payload.kind.singular).\(payload.id)" }

    /// `POST comments` with `commentable_type`, `commentable_id` and `comment`.
    public var request: NetworkRequest {
        NetworkRequest(method: .post, target: .path("comments"),
                       body: .json(Wire.NewComment(commentableType: payload.kind.singular, commentableId: payload.id, comment: payload.text), encoder: Wire.encoder))
    }

    /// The comment, pending, under its temporary identifier.
    public func applyOptimistically(_ db: Database) throws {
        try CRMComment(id: payload.localID, commentableType: payload.kind.singular, commentableId: payload.id, text: payload.text, pending: .create).upsert(db)
    }

    /// The server's comment replaces the temporary one.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        let comment = try Wire.decode(Wire.Comment.self, from: response).record
        _ = try CRMComment.deleteOne(db, key: payload.localID)
        try comment.upsert(db)
    }

    /// The temporary comment goes; the refusal is kept.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        _ = try CRMComment.deleteOne(db, key: payload.localID)
        try reject(error, db)
    }

    /// The comment as cached.
    public func record(from response: NetworkResponse, _ db: Database) throws -> CRMComment {
        let comment = try Wire.decode(Wire.Comment.self, from: response).record
        return try CRMComment.fetchOne(db, key: comment.id) ?? comment
    }

    /// The record commented on.
    public func entity(of record: CRMComment) -> any Sendable { subject }
}

/// Deletes a comment: `DELETE /comments/:id`.
///
/// The comment stays listed, marked ``PendingChange/delete``, until the server
/// agrees; then it goes. All changes of one comment share a lane.
public struct DeleteComment: SenbeiMutation {
    /// What is stored.
    public struct Payload: Codable, Sendable, Hashable {
        /// The change's own number.
        public var localID: Int
        /// The comment's identifier.
        public var id: Int
    }

    /// `senbei.deleteComment.v1`.
    public static let typeName = "senbei.deleteComment.v1"
    /// ``senbeiDidDeleteComment``.
    public static let didCommit = Notification.Name.senbeiDidDeleteComment
    /// What is stored.
    public var payload: Payload

    /// Rebuilds the change from its stored payload.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// Makes the change for comment `id`.
    public init(id: Int, localID: Int) {
        self.payload = Payload(localID: localID, id: id)
    }

    public var localID: Int { payload.localID }
    /// `deleting comment #12`.
    public var summary: String { "deleting comment #\(payload.id)" }
    /// The comment's lane.
    public var lane: String { "senbei.comment.\(payload.id)" }

    /// `DELETE comments/:id`.
    public var request: NetworkRequest { .delete("comments/\(payload.id)") }

    /// Marks the cached comment (if it is cached).
    public func applyOptimistically(_ db: Database) throws {
        try db.execute(sql: "UPDATE comment SET pending = ? WHERE id = ?", arguments: [PendingChange.delete, payload.id])
    }

    /// The comment goes.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        _ = try CRMComment.deleteOne(db, key: payload.id)
    }

    /// The mark goes; a comment the server does not have (404) goes with it.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        if error.code == .notFound {
            _ = try CRMComment.deleteOne(db, key: payload.id)
        } else {
            try db.execute(sql: "UPDATE comment SET pending = NULL WHERE id = ? AND pending = ?", arguments: [payload.id, PendingChange.delete])
        }
        try reject(error, db)
    }

    /// The deleted comment's identifier.
    public func record(from response: NetworkResponse, _ db: Database) throws -> Int { payload.id }

    /// The deleted comment's identifier.
    public func entity(of record: Int) -> any Sendable { record }
}
