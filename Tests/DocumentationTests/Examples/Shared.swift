import Depot
import DepotStore
import Foundation
import GRDB

// Types the documentation's examples share. Every ```swift block of README.md
// and of the DocC articles is in one of the files beside this one, and
// DocumentationTests checks that the text there is the text of the docs.

struct Contact: Codable, Sendable, Equatable {
    var id: Int
    var name: String
}

struct Page<Item: Decodable & Sendable>: Decodable, Sendable {
    var items: [Item]
}

/// What a pull-to-refresh control offers, so the examples read like an app.
@MainActor final class RefreshControl {
    private(set) var isRefreshing = true
    func endRefreshing() { isRefreshing = false }
}

/// A post that must go out even when the app exits.
struct SendPost: NetworkOperation {
    var text: String
    var request: NetworkRequest { .post("posts", json: ["text": text]) }
    var exitPolicy: ExitPolicy { .finish }
}

/// A contact row in the cache, for the DepotStore examples.
struct CachedContact: Codable, Sendable, FetchableRecord, PersistableRecord {
    var id: Int
    var name: String
}

/// The contacts endpoint, written into the cache.
struct FetchCachedContacts: CachingOperation {
    var request: NetworkRequest { .get("contacts") }

    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [CachedContact] {
        try response.decode([CachedContact].self)
    }

    func write(_ contacts: [CachedContact], to db: Database) throws -> Int {
        for contact in contacts { try contact.upsert(db) }
        return contacts.count
    }
}

/// The migrations of the DepotStore examples.
let migrator: DatabaseMigrator = {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("contacts") { db in
        try db.create(table: "cachedContact") { table in
            table.primaryKey("id", .integer)
            table.column("name", .text).notNull()
        }
    }
    return migrator
}()
