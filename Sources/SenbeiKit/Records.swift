import Foundation
import GRDB

/// The five kinds of CRM record the server lists page by page.
public enum EntityKind: String, CaseIterable, Codable, Sendable, DatabaseValueConvertible {
    case accounts, contacts, leads, opportunities, campaigns

    /// The singular name, as comments name their subject: `contact`, `opportunity`.
    public var singular: String {
        switch self {
        case .accounts: "account"
        case .contacts: "contact"
        case .leads: "lead"
        case .opportunities: "opportunity"
        case .campaigns: "campaign"
        }
    }
}

/// An account, contact, lead, opportunity or campaign, as the cache keeps it:
/// a row of the `entity` table, with the page and place the server listed it at.
///
/// For example, page 2 of the contacts, as the server ordered them:
///
/// ```swift
/// let contacts = try await store.read { db in try Entity.onPage(.contacts, 2).fetchAll(db) }
/// ```
public struct Entity: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// What kind of record this is; with ``id``, the primary key.
    public var kind: EntityKind
    /// The server's identifier, unique within the kind.
    public var id: Int
    /// The name (a person's, or the account's, opportunity's or campaign's).
    public var name: String
    /// The e-mail address, for contacts and leads.
    public var email: String?
    /// The company, when the server gives one.
    public var company: String?
    /// The phone number, for contacts that have one.
    public var phone: String?
    /// The server's version of the record (contacts have one: 1 when made,
    /// one more on every change), as last fetched; `nil` when it is not known.
    /// An edit is based on it (``EditContact``), and the cache never goes
    /// back to an older one (``DepotStore/RecordVersions``).
    public var version: Int?
    /// The page it was last listed on, or `nil` when it was created here and not listed since.
    public var page: Int?
    /// Its place on that page, from 0; a contact created here goes before the first.
    public var position: Int
    /// `.create` while a contact created here waits for the server (its ``id``
    /// is temporary and negative until then); `nil` for the server's rows.
    public var pending: PendingChange?

    /// Makes a record.
    public init(
        kind: EntityKind, id: Int, name: String, email: String? = nil, company: String? = nil, phone: String? = nil, version: Int? = nil,
        page: Int? = nil, position: Int = 0, pending: PendingChange? = nil
    ) {
        self.kind = kind
        self.id = id
        self.name = name
        self.email = email
        self.company = company
        self.phone = phone
        self.version = version
        self.page = page
        self.position = position
        self.pending = pending
    }

    /// The table's name: `entity`.
    public static let databaseTableName = "entity"

    /// The rows of page `page` of `kind`, in the server's order.
    public static func onPage(_ kind: EntityKind, _ page: Int) -> QueryInterfaceRequest<Entity> {
        Entity.filter(Column("kind") == kind.rawValue && Column("page") == page).order(Column("position"), Column("id"))
    }
}

/// What the cache knows about one page of a list: its size and the list's total.
/// A row of the `entityPage` table.
public struct PageInfo: Codable, Hashable, Sendable, FetchableRecord, PersistableRecord {
    /// The kind listed.
    public var kind: EntityKind
    /// The page number, from 1.
    public var page: Int
    /// How many records a page holds.
    public var perPage: Int
    /// How many records the whole list holds.
    public var total: Int

    /// Makes page information.
    public init(kind: EntityKind, page: Int, perPage: Int, total: Int) {
        self.kind = kind
        self.page = page
        self.perPage = perPage
        self.total = total
    }

    /// How many pages the list has (at least 1).
    public var pageCount: Int {
        // Written so that a server's total near Int.max cannot overflow.
        let size = max(1, perPage), total = max(0, total)
        return max(1, total / size + (total % size == 0 ? 0 : 1))
    }

    /// The table's name: `entityPage`.
    public static let databaseTableName = "entityPage"
}

/// What a comment is about: a record of some kind.
public struct Commentable: Hashable, Sendable, CustomStringConvertible {
    /// The record's kind.
    public var kind: EntityKind
    /// The record's identifier.
    public var id: Int

    /// The record `id` of `kind`.
    public init(_ kind: EntityKind, _ id: Int) {
        self.kind = kind
        self.id = id
    }

    /// `contact 3`.
    public var description: String { "\(kind.singular) \(id)" }
}

/// A comment on a record: a row of the `comment` table.
public struct CRMComment: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// The server's identifier.
    public var id: Int
    /// The singular kind of the record commented on (`contact`).
    public var commentableType: String
    /// The identifier of the record commented on.
    public var commentableId: Int
    /// What was said.
    public var text: String
    /// `.create` while a comment posted here waits for the server (its ``id`` is
    /// temporary and negative until then), `.delete` while its deletion does;
    /// `nil` for the server's rows.
    public var pending: PendingChange?

    /// Makes a comment.
    public init(id: Int, commentableType: String, commentableId: Int, text: String, pending: PendingChange? = nil) {
        self.id = id
        self.commentableType = commentableType
        self.commentableId = commentableId
        self.text = text
        self.pending = pending
    }

    /// The table's name: `comment`.
    public static let databaseTableName = "comment"

    /// The comments on `subject`, oldest first: the server's by identifier, then
    /// those posted here and not yet sent, in the order they were written.
    public static func on(_ subject: Commentable) -> QueryInterfaceRequest<CRMComment> {
        CRMComment.filter(Column("commentableType") == subject.kind.singular && Column("commentableId") == subject.id)
            .order(Column("id") < 0, abs(Column("id")))
    }
}

/// A task: a row of the `task` table. ``TaskBuckets`` groups them by due date.
public struct CRMTask: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// The server's identifier.
    public var id: Int
    /// What to do.
    public var name: String
    /// The day it is due, `yyyy-MM-dd`, or `nil` for "as soon as possible".
    public var due: String?
    /// Whether it is done (on the server: a task marked done here stays open,
    /// with ``pending`` `.complete`, until the server agrees).
    public var completed: Bool
    /// `.create` while a task created here waits for the server (its ``id`` is
    /// temporary and negative until then), `.complete` while its "done" does;
    /// `nil` for the server's rows.
    public var pending: PendingChange?

    /// Makes a task.
    public init(id: Int, name: String, due: String? = nil, completed: Bool = false, pending: PendingChange? = nil) {
        self.id = id
        self.name = name
        self.due = due
        self.completed = completed
        self.pending = pending
    }

    /// The table's name: `task`.
    public static let databaseTableName = "task"

    /// The tasks not done yet, by due day (undated first), then by identifier
    /// (those created here and not yet sent last, in the order they were written).
    public static let open = CRMTask.filter(Column("completed") == false).order(Column("due"), Column("id") < 0, abs(Column("id")))
}

/// Something that happened in the CRM: a row of the `activity` table, newest first.
public struct CRMActivity: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    /// The server's identifier.
    public var id: Int
    /// What was done: `created`, `completed`, `commented`.
    public var action: String
    /// What it was done to: `contact Zoe Quinn`.
    public var subject: String
    /// Its place in the server's list (0 is the newest).
    public var position: Int

    /// Makes an activity.
    public init(id: Int, action: String, subject: String, position: Int) {
        self.id = id
        self.action = action
        self.subject = subject
        self.position = position
    }

    /// The table's name: `activity`.
    public static let databaseTableName = "activity"

    /// Every activity, newest first.
    public static let newestFirst = CRMActivity.order(Column("position"))
}

/// The signed-in user, as `GET /profile` describes them.
public struct Profile: Codable, Hashable, Sendable {
    /// The login name.
    public var username: String
    /// The full name.
    public var name: String
    /// The e-mail address.
    public var email: String

    /// Makes a profile.
    public init(username: String, name: String, email: String) {
        self.username = username
        self.name = name
        self.email = email
    }
}
