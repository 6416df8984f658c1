import Depot
import DepotStore
import Foundation
import GRDB

// README.md, "In 20 lines". CachedContact and the `.contacts` migrator are
// the ones of YourFirstCachedList.swift, the article the README points to.

struct TopSongsFeed: Decodable, Sendable {
    struct Feed: Decodable, Sendable { var entry: [Entry] }
    struct Entry: Decodable, Sendable { var title: Label }
    struct Label: Decodable, Sendable { var label: String }
    var feed: Feed
}

struct ContactsPage: Decodable, Sendable {
    var items: [CachedContact]
}

enum ReadmeExample {
    struct FetchTopSongs: CachedValueOperation {             // one type per endpoint
        var limit = 10
        var request: NetworkRequest { .get("/topsongs/limit=\(limit)/json") }

        func parse(_ response: NetworkResponse, context: OperationContext) async throws -> [String] {
            try response.decode(TopSongsFeed.self).feed.entry.map(\.title.label)
        }
    }

    @MainActor static func lightPath(cacheFolder: URL) async throws {
        let store = try Store(path: cacheFolder.appending(path: "cache.sqlite").path)
        let controller = NetworkController(                      // injected, never a singleton
            configuration: .init(baseURL: URL(string: "http://127.0.0.1:8080")!),
            store: store)
        let songs = try controller.value(for: FetchTopSongs(), policy: .cacheFirst(maxAge: .seconds(300)))
        let shown = songs.value ?? []            // cached at once, then each refresh; @Observable
        let synced = songs.syncStatus.lastSynced // isSyncing, lastError, refresh(force:) too
        let report = await controller.shutdown(grace: .seconds(5))     // cancel what can go
        _ = (shown, synced, report)
    }

    struct SyncContacts: CachingOperation {                  // rows, in one transaction
        var request: NetworkRequest { .get("contacts") }

        func write(_ page: ContactsPage, to db: Database) throws {
            try CachedContact.deleteAll(db)
            for contact in page.items { try contact.insert(db) }
        }
    }

    @MainActor static func tables(cacheFolder: URL) throws {
        let store = try Store(path: cacheFolder.appending(path: "cache.sqlite").path, migrator: .contacts)
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://127.0.0.1:8080")!), store: store)
        let contacts = try controller.results(for: CachedContact.order(Column("name")),
                                              refreshing: SyncContacts(),
                                              policy: .cacheFirst(maxAge: .seconds(300)))
        let names = contacts.fetchedObjects.map(\.name)  // and a change set after each commit
        _ = names
    }
}
