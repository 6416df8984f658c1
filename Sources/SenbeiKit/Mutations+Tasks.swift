import Depot
import DepotStore
import Foundation
import GRDB

/// Creates a task: `POST /tasks`. With no due day it is due "as soon as possible".
///
/// The task shows in ``CRMTask/open`` at once, with its temporary identifier
/// and ``PendingChange/create``, in a lane of its own.
///
/// For example:
///
/// ```swift
/// let change = try await app.createTask(name: "Send the contract", due: "2030-01-02")
/// ```
public struct CreateTask: SenbeiMutation {
    /// What is stored.
    public struct Payload: Codable, Sendable, Hashable {
        /// The temporary identifier (negative).
        public var localID: Int
        /// What to do.
        public var name: String
        /// The day it is due, `yyyy-MM-dd`, or `nil`.
        public var due: String?
    }

    /// `senbei.newTask.v1`.
    public static let typeName = "senbei.newTask.v1"
    /// ``senbeiDidCreateTask``.
    public static let didCommit = Notification.Name.senbeiDidCreateTask
    /// What is stored.
    public var payload: Payload

    /// Rebuilds the change from its stored payload.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// Makes the change; `localID` is the task's temporary identifier (negative, unique).
    public init(name: String, due: String? = nil, localID: Int) {
        self.payload = Payload(localID: localID, name: name, due: due)
    }

    public var localID: Int { payload.localID }
    /// `new task "Call Ann"`.
    public var summary: String { "new task \"\(payload.name)\"" }
    /// The task list (its buckets) and the activity stream.
    public var invalidates: [CacheInvalidation] { [.tag("tasks"), .key(FetchActivities().cacheKey)] }
    /// A lane of its own: a new record.
    public var lane: String { "senbei.task.new\(payload.localID)" }

    /// `POST tasks` with `name` and `due`.
    public var request: NetworkRequest {
        NetworkRequest(method: .post, target: .path("tasks"), body: .json(Wire.NewTask(name: payload.name, due: payload.due), encoder: Wire.encoder))
    }

    /// The task, pending, under its temporary identifier.
    public func applyOptimistically(_ db: Database) throws {
        try CRMTask(id: payload.localID, name: payload.name, due: payload.due, pending: .create).upsert(db)
    }

    /// The server's task replaces the temporary one.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        let task = try Wire.decode(Wire.Task.self, from: response).record
        _ = try CRMTask.deleteOne(db, key: payload.localID)
        try task.upsert(db)
    }

    /// The temporary task goes; the refusal is kept.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        _ = try CRMTask.deleteOne(db, key: payload.localID)
        try reject(error, db)
    }

    /// The task as cached.
    public func record(from response: NetworkResponse, _ db: Database) throws -> CRMTask {
        let task = try Wire.decode(Wire.Task.self, from: response).record
        return try CRMTask.fetchOne(db, key: task.id) ?? task
    }

    /// The task's identifier.
    public func entity(of record: CRMTask) -> any Sendable { record.id }
}

/// Marks a task as done: `PUT /tasks/:id/complete`.
///
/// The task stays in ``CRMTask/open``, marked ``PendingChange/complete``, until
/// the server agrees; then it leaves the list. All changes of one task share a lane.
public struct MarkTaskDone: SenbeiMutation {
    /// What is stored.
    public struct Payload: Codable, Sendable, Hashable {
        /// The change's own number.
        public var localID: Int
        /// The task's identifier.
        public var id: Int
    }

    /// `senbei.markTaskDone.v1`.
    public static let typeName = "senbei.markTaskDone.v1"
    /// ``senbeiDidMarkTaskAsDone``.
    public static let didCommit = Notification.Name.senbeiDidMarkTaskAsDone
    /// What is stored.
    public var payload: Payload

    /// Rebuilds the change from its stored payload.
    public init(payload: Payload) {
        self.payload = payload
    }

    /// Makes the change for task `id`.
    public init(id: Int, localID: Int) {
        self.payload = Payload(localID: localID, id: id)
    }

    public var localID: Int { payload.localID }
    /// `marking task #3 done`.
    public var summary: String { "marking task #\(payload.id) done" }
    /// The task list (its buckets) and the activity stream.
    public var invalidates: [CacheInvalidation] { [.tag("tasks"), .key(FetchActivities().cacheKey)] }
    /// The task's lane.
    public var lane: String { "senbei.task.\(payload.id)" }

    /// `PUT tasks/:id/complete`.
    public var request: NetworkRequest { .put("tasks/\(payload.id)/complete") }

    /// Marks the cached task (if it is cached and open).
    public func applyOptimistically(_ db: Database) throws {
        try db.execute(sql: "UPDATE task SET pending = ? WHERE id = ? AND completed = 0", arguments: [PendingChange.complete, payload.id])
    }

    /// The server's task (done) replaces the cached one.
    public func commit(_ response: NetworkResponse, _ db: Database) throws {
        try Wire.decode(Wire.Task.self, from: response).record.upsert(db)
    }

    /// The mark goes; a task the server does not have (404) goes with it.
    public func rollback(_ error: DepotError, _ db: Database) throws {
        if error.code == .notFound {
            _ = try CRMTask.deleteOne(db, key: payload.id)
        } else {
            try db.execute(sql: "UPDATE task SET pending = NULL WHERE id = ? AND pending = ?", arguments: [payload.id, PendingChange.complete])
        }
        try reject(error, db)
    }

    /// The task as cached.
    public func record(from response: NetworkResponse, _ db: Database) throws -> CRMTask {
        let task = try Wire.decode(Wire.Task.self, from: response).record
        return try CRMTask.fetchOne(db, key: task.id) ?? task
    }

    /// The task's identifier.
    public func entity(of record: CRMTask) -> any Sendable { record.id }
}
