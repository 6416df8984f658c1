import Depot
import DepotStore
import Foundation
import GRDB
import Synchronization

/// The record the store tests use: a row with a section, a rank and a title.
struct Item: Codable, Hashable, Sendable, Identifiable, FetchableRecord, PersistableRecord {
    var id: Int
    var section: String
    var rank: Int
    var title: String

    static let databaseTableName = "item"

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("items") { db in
            try db.create(table: "item") { t in
                t.primaryKey("id", .integer)
                t.column("section", .text).notNull()
                t.column("rank", .integer).notNull()
                t.column("title", .text).notNull()
            }
        }
        return migrator
    }

    /// Sorted by section, then rank: the order sectioned results need.
    static var bySection: QueryInterfaceRequest<Item> {
        Item.order(Column("section"), Column("rank"), Column("id"))
    }
}

/// Fetches a JSON array of items and replaces the table with it, through
/// `CachingOperation`: parse off the database, write in one transaction.
struct FetchItems: CachingOperation {
    var url: URL
    var key = "items"
    var timeout: Timeout = .default
    var tags: Set<String> = []

    var request: NetworkRequest { .get(url) }
    var cacheKey: String { key }
    var cacheTags: Set<String> { tags }

    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [Item] {
        try response.decode([Item].self)
    }

    func write(_ items: [Item], to db: Database) throws -> Int {
        try Item.deleteAll(db)
        for item in items { try item.insert(db) }
        return items.count
    }
}

/// Parses inside the transaction: inserts each item as it decodes it, the way a
/// streaming parser does, so a failure halfway has already written rows that the
/// rollback must undo.
struct StreamItems: CachingOperation {
    var url: URL

    var request: NetworkRequest { .get(url) }
    var cacheKey: String { "stream-items" }

    func write(_ response: NetworkResponse, to db: Database) throws -> Int {
        let lines = response.text.split(separator: "\n")
        for line in lines {
            let item = try JSONDecoder().decode(Item.self, from: Data(line.utf8))
            try item.upsert(db)
        }
        return lines.count
    }
}

func makeItems(_ count: Int, sections: Int = 3, titlePrefix: String = "item") -> [Item] {
    (0..<count).map { i in
        Item(id: i, section: "s\(i % sections)", rank: i, title: "\(titlePrefix) \(i)")
    }
}

func jsonData(_ items: [Item]) throws -> Data {
    try JSONEncoder().encode(items)
}

func temporaryFolder() throws -> URL {
    let folder = FileManager.default.temporaryDirectory.appending(path: "depot-store-tests-\(UUID().uuidString)", directoryHint: .isDirectory)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}

/// A thread-safe counter for observation callbacks.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
