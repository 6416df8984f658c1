import Depot
import DepotStore
import Foundation
import GRDB

/// One change to the CRM's contacts or tasks, as the server's change feed
/// numbers them, whoever made it.
///
/// The enum is final on purpose: these are the four kinds of change the
/// CRM's feed defines. Deletions come as tombstones, `delete-contact` (a
/// contact deleted with `DELETE /contacts/:id`) and `delete-task`.
public enum CRMChange: Sendable, Hashable {
    /// A contact was created (or written again), as `GET /contacts` lists it.
    /// Its ``Entity/page`` and ``Entity/position`` are the cache's business.
    case contact(Entity)
    /// A task was created or completed, as `GET /tasks` lists it.
    case task(CRMTask)
    /// The contact with this identifier was deleted.
    case contactDeleted(id: Int)
    /// The task with this identifier was deleted.
    case taskDeleted(id: Int)
}

/// The CRM's change feed for the contacts and tasks Senbei caches: one
/// cursor and one connection for both, as the server numbers them together.
///
/// - catch-up: `GET /crm/changes?since=N&limit=M`;
/// - live: `GET /crm/events` (server-sent events `contact`, `task`, `reset`);
/// - a full sync: `GET /tasks`, every open task and its `Change-Cursor`.
///
/// **What a full sync rewrites.** The open tasks come whole in one response,
/// so a full sync replaces the `task` table with them, as ``FetchTasks``
/// does. Contacts are a paged list (at most 100 a request) that the cache
/// keeps page by page, each with its own ledger entry: one response cannot
/// rewrite them, so a full sync leaves the cached contacts in place and
/// marks every contact page stale (tag `contacts`), so each is fetched again
/// when next shown (at once, for a list with a live ``SyncStatus``).
///
/// **Why no change is missed.** The cursor kept is the task list's
/// `Change-Cursor` C: the tasks are exactly the server's as of C, the feed
/// brings every change after C, and every contact page is fetched again
/// after C. A first sync therefore starts after the current state: only
/// later changes reach ``LiveFeed/events()`` as `.applied`.
///
/// Each change is written as Senbei's own writes write it, so
/// ``CRMTask/open``, ``TaskBuckets``, the contact pages and ``ContactSearch``
/// see it: see ``apply(_:to:)``. Pending optimistic changes are applied again
/// on top of every write, by the feed's writer.
///
/// For example:
///
/// ```swift
/// let live = try LiveFeed(CRMFeed(), controller: controller)
/// let watch = live.watch()
/// for await case .applied(let changes) in live.events() {
///     for change in changes { print(change) }
/// }
/// _ = watch
/// ```
public struct CRMFeed: ChangeFeed {
    /// Changes asked for per page when catching up (the server sends at most 5,000).
    public var pageSize: Int

    /// Changes a catch-up page asks for by default.
    public static let defaultPageSize = 500

    /// Makes the feed.
    public init(pageSize: Int = CRMFeed.defaultPageSize) {
        self.pageSize = max(1, pageSize)
    }

    /// The ledger key of the feed's cursor: `senbei:crm:feed`.
    public static let syncKey = "senbei:crm:feed"

    /// ``syncKey``.
    public var syncKey: String { Self.syncKey }
    /// Data work: held until a sign-in succeeds, and sent with the session's token.
    public var category: OperationCategory { .senbei }
    /// `GET tasks`: every open task, with the feed's `Change-Cursor`.
    public var snapshotRequest: NetworkRequest { FetchTasks().request }
    /// `GET crm/events`.
    public var eventsRequest: NetworkRequest? { .get("crm/events") }

    /// `GET crm/changes?since=<cursor>&limit=<pageSize>`.
    public func changesRequest(after cursor: String) -> NetworkRequest {
        .get("crm/changes", query: ["since": cursor, "limit": "\(pageSize)"])
    }

    /// The open tasks, and the `Change-Cursor` they are current as of.
    public func decodeSnapshot(_ response: NetworkResponse) throws -> ChangePage<CRMChange> {
        guard let cursor = response.headers["Change-Cursor"], Int(cursor) != nil else {
            throw DepotError(.decoding, status: response.status, detail: "GET /tasks sent no Change-Cursor header")
        }
        return ChangePage(try Wire.decode([Wire.Task].self, from: response).map { .task($0.record) }, cursor: cursor)
    }

    /// One page of `/crm/changes`.
    public func decodeChanges(_ response: NetworkResponse) throws -> ChangePage<CRMChange> {
        let page = try Wire.decode(Wire.ChangesPage.self, from: response)
        let changes = try page.changes.map { entry throws(DepotError) -> CRMChange in
            guard let change = entry.crmChange else {
                throw DepotError(.decoding, status: response.status, detail: "CRM change \(entry.seq) (\"\(entry.change)\") carries no record")
            }
            return change
        }
        return ChangePage(changes, cursor: String(page.cursor), more: page.more)
    }

    /// One server-sent event: `contact`, `task` (the record as its list
    /// encodes it), `delete-contact`, `delete-task` (`{"id":N}`), or `reset`.
    public func decodeEvent(_ event: ServerSentEvent) throws -> LiveMessage<CRMChange> {
        let data = Data(event.data.utf8)
        let decoder = Wire.decoder()
        switch event.type {
        case "contact": return .changes([.contact(try decoder.decode(Wire.Entity.self, from: data).contact)])
        case "task": return .changes([.task(try decoder.decode(Wire.Task.self, from: data).record)])
        case "delete-contact": return .changes([.contactDeleted(id: try decoder.decode(Wire.Deleted.self, from: data).id)])
        case "delete-task": return .changes([.taskDeleted(id: try decoder.decode(Wire.Deleted.self, from: data).id)])
        case "reset": return .startOver
        default: return .ignore
        }
    }

    /// Writes one change as Senbei's own writes do:
    /// - a contact already cached keeps its page and place and takes the
    ///   server's name, e-mail and company; a new one goes before the first
    ///   contact of page 1 (the server lists new contacts first), is counted
    ///   in every cached page's total, and makes every contact page stale,
    ///   as an accepted ``CreateContact`` does;
    /// - a task is written whole, as an accepted ``CreateTask`` or
    ///   ``MarkTaskDone`` writes it (a completed one leaves ``CRMTask/open``);
    /// - a deletion removes the row (a contact's pages go stale).
    ///
    /// Every change also makes the activity stream stale.
    public func apply(_ change: CRMChange, to db: Database) throws {
        let contacts = EntityKind.contacts.rawValue
        let activities = CacheInvalidation.key(FetchActivities().cacheKey)
        switch change {
        case .contact(let contact):
            // An older version than the cache holds (the user's own write
            // came back first) changes nothing.
            guard try contact.admitVersion(db) else {
                _ = try SyncLedger.invalidate([activities], in: db)
                return
            }
            if var listed = try Entity.fetchOne(db, key: ["kind": contacts, "id": contact.id]) {
                listed.name = contact.name
                listed.email = contact.email
                listed.company = contact.company
                listed.phone = contact.phone
                listed.version = contact.version
                try listed.update(db)
                _ = try SyncLedger.invalidate([activities], in: db)
            } else {
                let position = try CreateContact.topOfPageOne(db)
                try Entity(
                    kind: .contacts, id: contact.id, name: contact.name, email: contact.email, company: contact.company, phone: contact.phone,
                    version: contact.version, page: 1, position: position
                ).insert(db)
                try db.execute(sql: "UPDATE entityPage SET total = total + 1 WHERE kind = ?", arguments: [contacts])
                _ = try SyncLedger.invalidate([.tag(contacts), activities], in: db)
            }
        case .task(let task):
            try task.upsert(db)
            _ = try SyncLedger.invalidate([activities], in: db)
        case .contactDeleted(let id):
            try RecordVersions.forget(Entity.contactKey(id), in: db)
            if try Entity.deleteOne(db, key: ["kind": contacts, "id": id]) {
                try db.execute(sql: "UPDATE entityPage SET total = MAX(0, total - 1) WHERE kind = ?", arguments: [contacts])
            }
            _ = try SyncLedger.invalidate([.tag(contacts), activities], in: db)
        case .taskDeleted(let id):
            _ = try CRMTask.deleteOne(db, key: id)
            _ = try SyncLedger.invalidate([activities], in: db)
        }
    }

    /// Before a full sync writes the open tasks: every task goes (as
    /// ``FetchTasks`` replaces them), and every contact page is marked stale,
    /// since a full sync does not rewrite the contacts (see the type's notes).
    public func removeAll(from db: Database) throws {
        _ = try CRMTask.deleteAll(db)
        _ = try SyncLedger.invalidate([.tag(EntityKind.contacts.rawValue), .key(FetchActivities().cacheKey)], in: db)
    }
}

extension Wire {
    /// One page of `GET /crm/changes`.
    struct ChangesPage: Decodable, Sendable {
        struct Entry: Decodable, Sendable {
            var seq: Int
            var change: String
            var contact: Wire.Entity?
            var task: Wire.Task?
            var id: Int?

            /// The change this entry holds; `nil` when it lacks its record.
            /// An unknown kind of change is not an error the feed can skip
            /// without losing it, so it is `nil` too.
            var crmChange: CRMChange? {
                switch (change, contact, task, id) {
                case ("contact", let contact?, _, _): .contact(contact.contact)
                case ("task", _, let task?, _): .task(task.record)
                case ("delete-contact", _, _, let id?): .contactDeleted(id: id)
                case ("delete-task", _, _, let id?): .taskDeleted(id: id)
                default: nil
                }
            }
        }

        var changes: [Entry]
        var cursor: Int
        var more: Bool
    }

    /// `{"id": N}`: what a deletion event carries.
    struct Deleted: Decodable, Sendable {
        var id: Int
    }
}

extension Wire.Entity {
    /// The contact as a change carries it (its page and place are set when it is written).
    var contact: Entity {
        Entity(kind: .contacts, id: id, name: name, email: email, company: company, phone: phone, version: version)
    }
}
