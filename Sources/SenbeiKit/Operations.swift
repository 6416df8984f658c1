import Depot
import DepotStore
import Foundation
import GRDB

extension OperationCategory {
    /// Senbei's data work. ``SenbeiApp`` holds it while nobody is signed in and
    /// cancels what is queued in it when a sign-in is refused or the session ends.
    public static let senbei: OperationCategory = "senbei"
    /// The sign-in itself, which must run while ``senbei`` is held.
    public static let senbeiLogin: OperationCategory = "senbei.login"
}

/// Who is signed in: `GET /profile`, with the bearer token the controller's
/// ``Depot/TokenAuthenticator`` adds. ``SenbeiApp/login()`` runs it right
/// after the password grant, to greet the user by name.
///
/// For example:
///
/// ```swift
/// await authenticator.signIn(try await controller.perform(tokens.passwordGrant(username: "admin", password: "secret")))
/// let profile = try await controller.perform(FetchProfile())
/// print("signed in as \(profile.name)")
/// ```
public struct FetchProfile: NetworkOperation {
    /// Makes the operation.
    public init() {}

    /// `GET profile`.
    public var request: NetworkRequest { .get("profile") }
    /// ``Depot/OperationCategory/senbeiLogin``: it runs while data work is held.
    public var category: OperationCategory { .senbeiLogin }
    /// High: everything else waits for it.
    public var priority: Priority { .high }
    /// Never shared: each sign-in asks who it signed in.
    public var coalescing: Coalescing { .never }
    /// Fails at once without a network (or without a token): a sign-in that
    /// waits would hold every data request behind it with no word to the user.
    public var offlineBehavior: OfflineBehavior { .failFast }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name)
    }

    /// Decodes the profile.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> Profile {
        try Wire.decode(Profile.self, from: response)
    }
}

/// Fetches one page of accounts, contacts, leads, opportunities or campaigns
/// and replaces that page in the cache: one operation type for the five list endpoints.
///
/// Each page has its own ledger key, so `cacheFirst` decides per page:
///
/// ```swift
/// _ = try await controller.perform(FetchList(.contacts, page: 2))
/// let rows = try await store.read { db in try Entity.onPage(.contacts, 2).fetchAll(db) }
/// ```
public struct FetchList: CachingOperation {
    /// The kind listed.
    public let kind: EntityKind
    /// The page, from 1.
    public let page: Int
    /// Records per page (the server accepts 1 to 100).
    public let perPage: Int

    /// Twenty records a page, the server's default.
    public static let defaultPerPage = 20

    /// Makes the operation for page `page` of `kind`.
    public init(_ kind: EntityKind, page: Int = 1, perPage: Int = FetchList.defaultPerPage) {
        self.kind = kind
        self.page = max(1, page)
        self.perPage = max(1, min(perPage, 100))
    }

    /// `GET <kind>?page=N&per_page=M`.
    public var request: NetworkRequest {
        .get(kind.rawValue, query: ["page": "\(page)", "per_page": "\(perPage)"])
    }

    /// `senbei:<kind>:page=N:per_page=M`.
    public var cacheKey: String { "senbei:\(kind.rawValue):page=\(page):per_page=\(perPage)" }
    /// The kind (`contacts`): a change that adds a record invalidates every page.
    public var cacheTags: Set<String> { [kind.rawValue] }
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }
    /// `.failFast`: someone waits for this answer; offline, ``SenbeiApp`` shows
    /// the cache (lists) or says the server cannot be reached, instead of waiting.
    public var offlineBehavior: OfflineBehavior { .failFast }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name, acceptsNotModified: sendsConditionalRequests)
    }

    /// Decodes the page off the database.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> FetchedPage {
        let wire = try Wire.decode(Wire.Page<Wire.Entity>.self, from: response)
        let items = wire.items.enumerated().map { position, item in
            Entity(kind: kind, id: item.id, name: item.name, email: item.email, company: item.company, phone: item.phone, version: item.version, page: page, position: position)
        }
        return FetchedPage(info: PageInfo(kind: kind, page: page, perPage: wire.perPage, total: wire.total), items: items)
    }

    /// Replaces the page's rows (a record listed on another page before moves
    /// here) and records the list's size. A record listed at an older version
    /// than the cache holds (a lagging replica, after the user's own edit)
    /// keeps the cached fields in its new place: versions never go back.
    /// - Returns: How many records the page holds.
    public func write(_ fetched: FetchedPage, to db: Database) throws -> Int {
        var cached: [Int: Entity?] = [:]
        for item in fetched.items where try !item.admitVersion(db) {
            cached[item.id] = try Entity.fetchOne(db, key: ["kind": kind.rawValue, "id": item.id])
        }
        try db.execute(sql: "DELETE FROM entity WHERE kind = ? AND page = ?", arguments: [kind.rawValue, page])
        for item in fetched.items {
            guard var kept = cached[item.id] ?? nil else {
                // A newer version is known but its row is gone: this copy's
                // fields and version go in together, so that an edit of them
                // is based on the version they are.
                if cached.keys.contains(item.id) { try item.replaceVersion(db) }
                try item.upsert(db)
                continue
            }
            (kept.page, kept.position) = (item.page, item.position)
            try kept.upsert(db)
        }
        try fetched.info.upsert(db)
        return fetched.items.count
    }
}

/// One page as the server sent it, before ``FetchList`` writes it.
public struct FetchedPage: Sendable, Hashable {
    /// The page's size and the list's total.
    public var info: PageInfo
    /// The records, in the server's order.
    public var items: [Entity]

    /// Makes a page.
    public init(info: PageInfo, items: [Entity]) {
        self.info = info
        self.items = items
    }
}

/// What a contact search found.
public struct ContactMatches: Sendable, Hashable {
    /// The text searched for.
    public var query: String
    /// The first page of matching contacts.
    public var contacts: [Entity]
    /// How many contacts match in all.
    public var total: Int

    /// Makes a result.
    public init(query: String, contacts: [Entity], total: Int) {
        self.query = query
        self.contacts = contacts
        self.total = total
    }
}

/// Searches contacts by name or e-mail: `GET /contacts?query=...`.
///
/// Search results are not cached: they are the answer to one keystroke and
/// stale at the next. ``ContactSearch`` runs one per keystroke and cancels the
/// one before.
public struct SearchContacts: NetworkOperation {
    /// The text to look for.
    public let query: String
    /// How many matches to bring back.
    public let limit: Int

    /// Makes the search for `query`.
    public init(query: String, limit: Int = FetchList.defaultPerPage) {
        self.query = query
        self.limit = max(1, min(limit, 100))
    }

    /// `GET contacts?query=...&per_page=N`.
    public var request: NetworkRequest { .get("contacts", query: ["query": query, "per_page": "\(limit)"]) }
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }
    /// `.failFast`: someone waits for this answer; offline, ``SenbeiApp`` shows
    /// the cache (lists) or says the server cannot be reached, instead of waiting.
    public var offlineBehavior: OfflineBehavior { .failFast }
    /// High: someone is typing and waiting.
    public var priority: Priority { .high }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name)
    }

    /// Decodes the matches.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> ContactMatches {
        let page = try Wire.decode(Wire.Page<Wire.Entity>.self, from: response)
        let contacts = page.items.enumerated().map { position, item in
            Entity(kind: .contacts, id: item.id, name: item.name, email: item.email, company: item.company, position: position)
        }
        return ContactMatches(query: query, contacts: contacts, total: page.total)
    }
}

/// Fetches the comments on one record and replaces them in the cache.
public struct FetchComments: CachingOperation {
    /// The record commented on.
    public let subject: Commentable

    /// Makes the operation for the comments on `subject`.
    public init(on subject: Commentable) {
        self.subject = subject
    }

    /// `GET comments?<kind>_id=N`.
    public var request: NetworkRequest { .get("comments", query: ["\(subject.kind.singular)_id": "\(subject.id)"]) }
    /// `senbei:comments:<kind>:<id>`.
    public var cacheKey: String { "senbei:comments:\(subject.kind.singular):\(subject.id)" }
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }
    /// `.failFast`: someone waits for this answer; offline, ``SenbeiApp`` shows
    /// the cache (lists) or says the server cannot be reached, instead of waiting.
    public var offlineBehavior: OfflineBehavior { .failFast }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name, acceptsNotModified: sendsConditionalRequests)
    }

    /// Decodes the comments.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [CRMComment] {
        try Wire.decode([Wire.Comment].self, from: response).map(\.record)
    }

    /// Replaces the subject's comments.
    /// - Returns: The comments, oldest first.
    public func write(_ comments: [CRMComment], to db: Database) throws -> [CRMComment] {
        try CRMComment.on(subject).deleteAll(db)
        for comment in comments { try comment.upsert(db) }
        return try CRMComment.on(subject).fetchAll(db)
    }
}

/// Fetches the open tasks and replaces the `task` table with them.
public struct FetchTasks: CachingOperation {
    /// Makes the operation.
    public init() {}

    /// `GET tasks`.
    public var request: NetworkRequest { .get("tasks") }
    /// `senbei:tasks`.
    public var cacheKey: String { "senbei:tasks" }
    /// `tasks`: what task changes invalidate.
    public var cacheTags: Set<String> { ["tasks"] }
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }
    /// `.failFast`: someone waits for this answer; offline, ``SenbeiApp`` shows
    /// the cache (lists) or says the server cannot be reached, instead of waiting.
    public var offlineBehavior: OfflineBehavior { .failFast }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name, acceptsNotModified: sendsConditionalRequests)
    }

    /// Decodes the tasks.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [CRMTask] {
        try Wire.decode([Wire.Task].self, from: response).map(\.record)
    }

    /// Replaces every task.
    /// - Returns: The tasks as stored.
    public func write(_ tasks: [CRMTask], to db: Database) throws -> [CRMTask] {
        try CRMTask.deleteAll(db)
        for task in tasks { try task.insert(db) }
        return tasks
    }
}

/// Fetches the activity stream and replaces the `activity` table with it.
public struct FetchActivities: CachingOperation {
    /// Makes the operation.
    public init() {}

    /// `GET activities`.
    public var request: NetworkRequest { .get("activities") }
    /// `senbei:activities`.
    public var cacheKey: String { "senbei:activities" }
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { .senbei }
    /// `.failFast`: someone waits for this answer; offline, ``SenbeiApp`` shows
    /// the cache (lists) or says the server cannot be reached, instead of waiting.
    public var offlineBehavior: OfflineBehavior { .failFast }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try SenbeiResponse.validate(response, operation: name, acceptsNotModified: sendsConditionalRequests)
    }

    /// Decodes the activities, newest first.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [CRMActivity] {
        try Wire.decode([Wire.Activity].self, from: response).enumerated().map { position, item in
            CRMActivity(id: item.id, action: item.action, subject: item.subject, position: position)
        }
    }

    /// Replaces every activity.
    /// - Returns: The activities, newest first.
    public func write(_ activities: [CRMActivity], to db: Database) throws -> [CRMActivity] {
        try CRMActivity.deleteAll(db)
        for activity in activities { try activity.upsert(db) }
        return activities
    }
}
