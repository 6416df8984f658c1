import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// A paged list in the three shapes paged APIs take, for Depot's paging
/// tests: `GET /paging/items?limit=N` and then `cursor=C` (an opaque
/// cursor), `page=P` (page numbers from 1) or `before=ID` (older items).
/// Items are listed newest (largest id) first; `POST /paging/items?count=N`
/// adds N newer ones on top, which shifts every page-numbered page.
///
/// Every answer is `{"items": [{"id", "title"}], "next_cursor": C or null,
/// "page": P or null, "total": T}`.
///
/// `fault=` makes the server misbehave the ways clients must survive:
/// `repeat` answers the first page whatever was asked, `empty` answers every
/// later page empty while saying there are more, `badcursor` gives an empty
/// next cursor.
enum PagingRoutes {
    struct Item: Codable, Sendable, Hashable {
        var id: Int
        var title: String
    }

    struct Page: Codable, Sendable {
        var items: [Item]
        var nextCursor: String?
        var page: Int?
        var total: Int
    }

    /// How many items the list starts with.
    static let initialCount = 45

    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        // Newest first.
        let stored = Mutex((1...initialCount).reversed().map { Item(id: $0, title: "item \($0)") })

        router.get("/paging/items") { request, _ in
            let parameters = request.uri.queryParameters
            let limit = max(1, min(parameters.get("limit", as: Int.self) ?? 10, 100))
            let fault = parameters.get("fault")
            let all = stored.withLock { $0 }
            let firstAsked = fault == "repeat" || (parameters.get("cursor") == nil && parameters.get("page") == nil && parameters.get("before") == nil)
            var items: [Item]
            var pageNumber: Int?
            if firstAsked {
                items = Array(all.prefix(limit))
                pageNumber = parameters.get("page", as: Int.self)
            } else if let cursor = parameters.get("cursor") {
                guard let last = decodeCursor(cursor) else { return FaultRoutes.text(.badRequest, "malformed cursor") }
                items = Array(all.filter { $0.id < last }.prefix(limit))
            } else if let page = parameters.get("page", as: Int.self) {
                let (skipped, overflow) = (max(1, page) - 1).multipliedReportingOverflow(by: limit)
                items = overflow ? [] : Array(all.dropFirst(skipped).prefix(limit))
                pageNumber = page
            } else {
                let before = parameters.get("before", as: Int.self) ?? Int.max
                items = Array(all.filter { $0.id < before }.prefix(limit))
            }
            if fault == "empty", !firstAsked { items = [] }
            let lastShown = firstAsked ? all.prefix(limit).last : items.last
            let more = lastShown.map { shown in all.contains { $0.id < shown.id } } ?? (fault == "empty")
            var next = more ? lastShown.map { encodeCursor($0.id) } ?? encodeCursor(0) : nil
            if fault == "empty", !firstAsked { next = parameters.get("cursor") ?? encodeCursor(0) }
            if fault == "badcursor", next != nil { next = "" }
            return try SenbeiRoutes.json(Page(items: items, nextCursor: next, page: pageNumber, total: fault == "empty" ? all.count + limit : all.count))
        }

        router.post("/paging/items") { request, _ in
            let count = max(1, min(request.uri.queryParameters.get("count", as: Int.self) ?? 1, 1_000))
            let added = stored.withLock { items -> [Item] in
                let top = items.first?.id ?? 0
                let new = (1...count).map { Item(id: top + $0, title: "item \(top + $0)") }.reversed()
                items.insert(contentsOf: new, at: 0)
                return Array(new)
            }
            return try SenbeiRoutes.json(added, status: .created)
        }
    }

    /// An opaque cursor: base64 of `after:<id>`.
    static func encodeCursor(_ id: Int) -> String {
        Data("after:\(id)".utf8).base64EncodedString()
    }

    static func decodeCursor(_ cursor: String) -> Int? {
        let raw = cursor.removingPercentEncoding ?? cursor
        guard let data = Data(base64Encoded: raw), let text = String(data: data, encoding: .utf8), text.hasPrefix("after:") else { return nil }
        return Int(text.dropFirst("after:".count))
    }
}
