import Foundation
import Hummingbird
import NIOCore
import Seeded

/// A Fat Free CRM-like JSON API for the Senbei example, behind HTTP Basic auth
/// or a bearer token from ``OAuthTokens``' `POST /oauth/token`.
///
/// Lists answer `{"items": [...], "page": N, "per_page": M, "total": T}`;
/// validation errors answer 422 with `{"errors": {"field": ["message"]}}`, and
/// errors that belong to no field (a missing record) use the field `base`, as Rails does.
/// A task without a due date is due "as soon as possible". Contacts have
/// versions, and are edited and deleted only at the version the client names
/// (``addContacts(to:keys:store:)``). Every write (`POST /contacts`,
/// `PATCH /contacts/:id`, `DELETE /contacts/:id`, `POST /comments`,
/// `DELETE /comments/:id`, `POST /tasks`, `PUT /tasks/:id/complete`) honours
/// `Idempotency-Key` (``IdempotencyKeys``); `PATCH` and `DELETE /contacts/:id`
/// and `POST /tasks` ignore it with `?idempotency=ignored`.
/// Every change to a contact or a task is numbered in one CRM change feed,
/// served at `GET /crm/events` and `GET /crm/changes` (``addChanges(to:state:)``).
enum SenbeiRoutes {
    /// A record of any of the ``kinds``, as its list encodes it.
    struct Entity: Codable, Sendable, Hashable {
        var id: Int
        var name: String
        var email: String?
        var company: String?
        /// A contact's phone number; `nil` (left out of the JSON, as `email`
        /// and `company` are) until a `PATCH /contacts/:id` sets one.
        var phone: String? = nil
        /// 1 when made, one more on every change: a contact's `ETag` is
        /// `"<version>"` (``SenbeiRoutes/eTag(_:)``).
        var version = 1
    }

    struct Comment: Codable, Sendable, Hashable {
        var id: Int
        var commentableType: String
        var commentableId: Int
        var comment: String
    }

    struct CRMTask: Codable, Sendable, Hashable {
        var id: Int
        var name: String
        /// yyyy-MM-dd (UTC), or `nil`: "as soon as possible".
        var due: String?
        var completed: Bool
    }

    struct Activity: Codable, Sendable, Hashable {
        var id: Int
        var action: String
        var subject: String
    }

    struct Page<Item: Codable & Sendable>: Codable, Sendable {
        var items: [Item]
        var page: Int
        var perPage: Int
        var total: Int
    }

    struct Store: Sendable {
        var lists: [String: [Entity]]
        var comments: [Comment] = []
        var tasks: [CRMTask]
        var activities: [Activity] = []
        var nextID = 10_000
    }

    static let kinds = ["accounts", "contacts", "leads", "opportunities", "campaigns"]
    static let username = "admin"
    static let password = "secret"

    static func makeStore(seed: UInt64, today: Date) -> Store {
        var random = SplitMix64(seed: seed &+ 99)
        let first = ["Ann", "Bob", "Chen", "Dana", "Eve", "Farid", "Grace", "Hiro", "Ines", "Jon"]
        let last = ["Smith", "Okafor", "Nakamura", "Silva", "Kowalski", "Haddad", "Larsen", "Moreau"]
        let companies = ["Big Nerd Ranch", "Initech", "Hooli", "Acme", "Globex", "Umbrella"]
        var lists: [String: [Entity]] = [:]
        for (offset, kind) in kinds.enumerated() {
            lists[kind] = (1...(40 + offset * 11)).map { index in
                let name = "\(first[Int(random.next() % 10)]) \(last[Int(random.next() % 8)])"
                let company = companies[Int(random.next() % 6)]
                let label = kind == "contacts" || kind == "leads" ? name : "\(company) \(kind.dropLast().capitalized) \(index)"
                return Entity(id: index, name: label, email: kind == "contacts" || kind == "leads" ? "\(name.lowercased().replacingOccurrences(of: " ", with: "."))@example.com" : nil, company: company)
            }
        }
        // Due dates across every bucket: overdue, today, tomorrow, this week, next
        // week, later, and two with no date at all ("as soon as possible").
        let offsets: [Int?] = [-3, -1, 0, 0, 1, 3, 5, 9, 12, 30, nil, nil]
        let contacts = lists["contacts"] ?? []
        let tasks = offsets.enumerated().map { index, days in
            let who = contacts.indices.contains(index) ? " " + contacts[index].name : ""
            return CRMTask(id: index + 1, name: ["Call", "Email", "Follow up with", "Send quote to"][index % 4] + who, due: days.map { day(today.addingTimeInterval(Double($0) * 86_400)) }, completed: false)
        }
        let activities = [
            Activity(id: 3, action: "created", subject: "opportunity Hooli Opportunity 3"),
            Activity(id: 2, action: "updated", subject: "account Acme Account 2"),
            Activity(id: 1, action: "created", subject: "campaign Globex Campaign 1"),
        ]
        return Store(lists: lists, tasks: tasks, activities: activities)
    }

    static func day(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day())
    }

    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        let store = state.crm
        // Every write honours Idempotency-Key; a 401 comes first and claims no key.
        let keys = IdempotencyKeys { state.countDelivery(ofIdempotencyKey: $0, route: $1) }
        let tokens = OAuthTokens(server: state)
        OAuthTokens.add(to: router, tokens: tokens)
        let crm = router.group().add(middleware: CRMAuthMiddleware(tokens: tokens))

        crm.get("/profile") { _, _ in
            try json(["username": username, "name": "Admin User", "email": "admin@example.com"])
        }
        for kind in kinds {
            crm.get("/\(kind)") { request, _ in
                let page = max(1, request.uri.queryParameters.get("page", as: Int.self) ?? 1)
                let perPage = max(1, min(request.uri.queryParameters.get("per_page", as: Int.self) ?? 20, 100))
                // Hummingbird hands query values over still encoded: "ann+nak" (form) or "ann%20nak".
                let query = request.uri.queryParameters.get("query").map { raw in
                    let spaced = raw.replacingOccurrences(of: "+", with: " ")
                    return (spaced.removingPercentEncoding ?? spaced).lowercased()
                }
                let (list, cursor) = store.read { store, log in (store.lists[kind] ?? [], log.sequence) }
                let all = list.filter { entity in
                    guard let query, !query.isEmpty else { return true }
                    return entity.name.lowercased().contains(query) || (entity.email?.contains(query) ?? false)
                }
                // A page far past the end (even Int.max) is simply empty: no overflow.
                let (skipped, overflow) = (page - 1).multipliedReportingOverflow(by: perPage)
                let items = overflow ? [] : Array(all.dropFirst(skipped).prefix(perPage))
                return try json(Page(items: items, page: page, perPage: perPage, total: all.count), changeCursor: cursor)
            }
        }
        addContacts(to: crm, keys: keys, store: store)
        crm.get("/comments") { request, _ in
            let pair = ["account", "contact", "lead", "opportunity", "campaign"].lazy
                .compactMap { type in request.uri.queryParameters.get("\(type)_id", as: Int.self).map { (type, $0) } }
                .first
            guard let (type, id) = pair else { return try invalid(["commentable": ["give one of account_id, contact_id, lead_id, opportunity_id, campaign_id"]]) }
            let comments = store.read { store, _ in store.comments.filter { $0.commentableType == type && $0.commentableId == id } }
            return try json(comments)
        }
        crm.post("/comments") { request, _ in
            try await keys.respond(to: request) { data in
                struct NewComment: Decodable { var commentableType: String?; var commentableId: Int?; var comment: String? }
                let body = try? decode(NewComment.self, data)
                var errors: [String: [String]] = [:]
                if (body?.comment ?? "").trimmingCharacters(in: .whitespaces).isEmpty { errors["comment"] = ["can't be blank"] }
                if body?.commentableType == nil || body?.commentableId == nil { errors["commentable"] = ["is required"] }
                guard errors.isEmpty, let body, let type = body.commentableType, let id = body.commentableId, let text = body.comment else { return try invalid(errors) }
                let comment = store.write { store, _ -> Comment in
                    store.nextID += 1
                    let comment = Comment(id: store.nextID, commentableType: type, commentableId: id, comment: text)
                    store.comments.append(comment)
                    store.activities.insert(Activity(id: store.nextID, action: "commented", subject: "\(type) \(id)"), at: 0)
                    return comment
                }
                return try json(comment, status: .created)
            }
        }
        crm.delete("/comments/:id") { request, context in
            try await keys.respond(to: request) { _ in
                let id = try context.parameters.require("id", as: Int.self)
                let removed = store.write { store, _ -> Bool in
                    let before = store.comments.count
                    store.comments.removeAll { $0.id == id }
                    return store.comments.count < before
                }
                return removed ? Response(status: .noContent) : try invalidStatus(.notFound, ["base": ["there is no comment \(id)"]])
            }
        }
        crm.get("/tasks") { _, _ in
            let (tasks, cursor) = store.read { store, log in (store.tasks.filter { !$0.completed }, log.sequence) }
            return try json(tasks, changeCursor: cursor)
        }
        // `?idempotency=ignored`, as for contacts: a server that does not
        // honour the key, for tests that prove a client sends a task once.
        crm.post("/tasks") { request, _ in
            try await keys.respond(to: request, deduplicating: deduplicates(request)) { data in
                struct NewTask: Decodable { var name: String?; var due: String? }
                let body = try? decode(NewTask.self, data)
                var errors: [String: [String]] = [:]
                if (body?.name ?? "").trimmingCharacters(in: .whitespaces).isEmpty { errors["name"] = ["can't be blank"] }
                if let due = body?.due, (try? Date(due, strategy: Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day())) == nil { errors["due"] = ["must be yyyy-MM-dd"] }
                guard errors.isEmpty, let name = body?.name else { return try invalid(errors) }
                let task = store.write { store, log in store.addTask(name: name, due: body?.due, log: &log) }
                return try json(task, status: .created)
            }
        }
        crm.put("/tasks/:id/complete") { request, context in
            try await keys.respond(to: request) { _ in
                let id = try context.parameters.require("id", as: Int.self)
                let task = store.write { store, log in store.completeTask(id: id, log: &log) }
                guard let task else { return try invalidStatus(.notFound, ["base": ["there is no task \(id)"]]) }
                return try json(task)
            }
        }
        crm.get("/activities") { _, _ in
            try json(store.read { store, _ in store.activities })
        }
        addChanges(to: crm, state: state)
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder.sorted
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return encoder
    }()

    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }

    /// A JSON list answer with the CRM's `Change-Cursor`: the change number its snapshot is at.
    static func json<T: Encodable>(_ value: T, changeCursor: Int) throws -> Response {
        var response = try json(value)
        response.headers[ChangeFeed<Store, Change>.changeCursorHeader] = "\(changeCursor)"
        return response
    }

    static func invalid(_ errors: [String: [String]]) throws -> Response {
        try invalidStatus(.unprocessableContent, errors)
    }

    static func invalidStatus(_ status: HTTPResponse.Status, _ errors: [String: [String]]) throws -> Response {
        try json(["errors": errors], status: status)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ data: ByteBuffer) throws -> T {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(T.self, from: Data(data.readableBytesView))
    }
}

/// Auth for the CRM routes: HTTP Basic with the CRM's user name and password,
/// or `Bearer` with an unexpired access token; 401 with a challenge otherwise.
struct CRMAuthMiddleware: RouterMiddleware {
    typealias Context = DemoRequestContext
    let tokens: OAuthTokens

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let basic = "Basic " + Data("\(SenbeiRoutes.username):\(SenbeiRoutes.password)".utf8).base64EncodedString()
        let authorization = request.headers[.authorization] ?? ""
        if authorization == basic { return try await next(request, context) }
        if authorization.hasPrefix("Bearer ") {
            guard tokens.isValid(accessToken: String(authorization.dropFirst("Bearer ".count))) else {
                var response = try SenbeiRoutes.invalidStatus(.unauthorized, ["base": ["the access token is invalid or expired"]])
                response.headers[.wwwAuthenticate] = #"Bearer realm="depot-server", error="invalid_token""#
                return response
            }
            return try await next(request, context)
        }
        var response = try SenbeiRoutes.invalidStatus(.unauthorized, ["base": ["bad username or password"]])
        response.headers[.wwwAuthenticate] = #"Basic realm="depot-server""#
        return response
    }
}
