import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import Foundation
import GRDB

/// A row of the depot-server's `/paging/items` list, cached.
struct PagedItem: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    var id: Int
    var title: String

    static let databaseTableName = "pagedItem"

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("pagedItems") { db in
            try db.create(table: "pagedItem") { t in
                t.primaryKey("id", .integer)
                t.column("title", .text).notNull()
            }
        }
        return migrator
    }

    /// Newest first, as the server lists them.
    static var newestFirst: QueryInterfaceRequest<PagedItem> { PagedItem.order(Column("id").desc) }
}

/// The three shapes of paged API the server speaks, and the faults it can put on.
enum PagingShape: String, Sendable {
    case cursor, number, beforeID
}

/// One page of `/paging/items`, upserted by id.
struct FetchPagedItems: CachingOperation {
    struct Page: Decodable, Sendable {
        var items: [PagedItem]
        var nextCursor: String?
        var total: Int

        enum CodingKeys: String, CodingKey {
            case items, total
            case nextCursor = "next_cursor"
        }
    }

    var shape: PagingShape
    var position: PagePosition
    var limit: Int
    var fault: String?

    var request: NetworkRequest {
        var request = NetworkRequest.get("paging/items", query: ["limit": "\(limit)"])
        if let cursor = position.cursor { request.query.append(URLQueryItem(name: "cursor", value: cursor)) }
        if let number = position.number { request.query.append(URLQueryItem(name: "page", value: "\(number)")) }
        if let before = position.beforeID { request.query.append(URLQueryItem(name: "before", value: before)) }
        if let fault { request.query.append(URLQueryItem(name: "fault", value: fault)) }
        return request
    }

    /// Fails at once offline: a page someone scrolled to is asked for now or not at all.
    var offlineBehavior: OfflineBehavior { .failFast }

    func write(_ page: Page, to db: Database) throws -> PageContents<Int> {
        for item in page.items { try item.upsert(db) }
        let next: PagePosition?
        switch shape {
        case .cursor:
            next = page.nextCursor.map { .cursor($0) }
        case .number:
            let number = position.number ?? 1
            next = number * limit < page.total ? .number(number + 1) : nil
        case .beforeID:
            next = page.nextCursor == nil ? nil : page.items.last.map { .before(id: $0.id) }
        }
        return PageContents(ids: page.items.map(\.id), next: next)
    }
}

/// `/paging/items` as a paged list.
struct PagedItemsEndpoint: PageableEndpoint {
    var shape: PagingShape
    var limit = 10
    var fault: String?

    var pagingKey: String { "paging-items:\(shape.rawValue)" }
    var firstPage: PagePosition { shape == .number ? .number(1) : .start }

    func operation(for position: PagePosition) throws -> FetchPagedItems {
        FetchPagedItems(shape: shape, position: position, limit: limit, fault: fault)
    }

    func removeItems(_ ids: [Int], from db: Database) throws {
        _ = try PagedItem.deleteAll(db, keys: ids)
    }
}

/// A store file in a temporary folder, a controller over AsyncHTTPClient to a server.
struct PagingSetup {
    let folder: URL
    var path: String { folder.appending(path: "cache.sqlite").path }

    func store() throws -> Store {
        try Store(path: path, migrator: PagedItem.migrator)
    }

    func controller(_ baseURL: URL, store: Store) -> NetworkController {
        var configuration = NetworkController.Configuration(baseURL: baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
        configuration.store = store
        return NetworkController(configuration: configuration)
    }

    /// Adds `count` newer items on top of the server's list.
    static func addItems(_ count: Int, with controller: NetworkController) async throws {
        _ = try await controller.perform(AddPagedItems(count: count))
    }

    /// How many `GET /paging/items` the server answered.
    static func served(_ server: DemoServer) -> Int {
        server.currentStats.requests.filter { $0.key.contains("/paging/items") && $0.key.hasPrefix("GET") }.values.reduce(0, +)
    }
}

/// `POST /paging/items?count=N`: newer items on top of the server's list.
struct AddPagedItems: NetworkOperation {
    typealias Output = NetworkResponse
    var count: Int
    var request: NetworkRequest {
        NetworkRequest(method: .post, target: .path("paging/items"), query: [URLQueryItem(name: "count", value: "\(count)")])
    }
}
