import Depot
import DepotStore
import Foundation
import GRDB

// Sources/DepotStore/DepotStore.docc/KeepingTheCacheInShape.md (its retention example
// is RetentionExamples.articleExample, in Retention.swift)

enum CacheShapeExamples {
    struct CachedTask: Codable, Sendable, FetchableRecord, PersistableRecord {
        var id: Int
        var name: String
    }

    struct FetchTasks: CachingOperation {
        var request: NetworkRequest { .get("tasks") }
        var cacheKey: String { "tasks" }
        var cacheTags: Set<String> { ["tasks"] }

        func write(_ tasks: [CachedTask], to db: Database) throws {
            try CachedTask.deleteAll(db)
            for task in tasks { try task.insert(db) }
        }
    }

    static func invalidate(store: Store) async throws {
        try await store.ledger.invalidate(.tag("tasks"), .keyPrefix("contacts:"))
    }

    struct CompleteTask: Mutation {
        static let typeName = "CompleteTask.v1"
        var payload: Int
        init(payload: Int) { self.payload = payload }

        var request: NetworkRequest { .put("tasks/\(payload)/complete") }
        var invalidates: [CacheInvalidation] { [.tag("tasks")] }

        func applyOptimistically(_ db: Database) throws {}
        func commit(_ response: NetworkResponse, _ db: Database) throws {}
        func rollback(_ error: DepotError, _ db: Database) throws {}
    }

    struct CachedSong: Codable, Sendable, Identifiable, Equatable, FetchableRecord, PersistableRecord {
        var id: Int
        var rank: Int
        var title: String
    }

    struct FetchSongs: CachingOperation {
        var request: NetworkRequest { .get("songs") }

        func write(_ songs: [CachedSong], to db: Database) throws {
            try CachedSong.deleteAll(db)
            for song in songs { try song.insert(db) }
        }
    }

    @MainActor
    static func refreshAsThePolicySays(controller: NetworkController) async throws {
        let songs = try controller.results(for: CachedSong.order(Column("rank")),
                                           refreshing: FetchSongs(),
                                           policy: .cacheFirst(maxAge: .seconds(300)))
        if let status = songs.syncStatus {            // always set by results(for:refreshing:)
            status.autoRefresh(every: .seconds(60))   // fetches at most every 5 minutes
            await status.refresh(force: true)          // pull to refresh
        }
    }

    @MainActor
    static func asLongAsTheServerSays(controller: NetworkController, store: Store) async throws {
        let asServed = try controller.results(for: CachedSong.order(Column("rank")),
                                              refreshing: FetchSongs(),
                                              policy: .cacheFirst)
        let entry = try await store.ledger.entry(for: FetchSongs().cacheKey)
        print("fresh until", entry?.freshUntil ?? .distantPast)
        _ = asServed
    }

    struct PagedItem: Codable, Sendable, Identifiable, Equatable, FetchableRecord, PersistableRecord {
        var id: Int
        var title: String
    }

    struct FetchItemPage: CachingOperation {
        struct Page: Decodable, Sendable {
            var items: [PagedItem]
            var nextCursor: String?
        }

        var position: PagePosition
        var request: NetworkRequest {
            var request = NetworkRequest.get("items", query: ["limit": "20"])
            if let cursor = position.cursor { request.query.append(URLQueryItem(name: "cursor", value: cursor)) }
            return request
        }

        func write(_ page: Page, to db: Database) throws -> PageContents<Int> {
            for item in page.items { try item.upsert(db) }
            return PageContents(ids: page.items.map(\.id), next: page.nextCursor.map { .cursor($0) })
        }
    }

    struct ItemPages: PageableEndpoint {
        var pagingKey: String { "items" }
        var firstPage: PagePosition { .start }
        func operation(for position: PagePosition) throws -> FetchItemPage { FetchItemPage(position: position) }
        func removeItems(_ ids: [Int], from db: Database) throws { _ = try PagedItem.deleteAll(db, keys: ids) }
    }

    @MainActor
    static func pagedList(controller: NetworkController) async throws {
        let items = try controller.pagedResults(for: PagedItem.order(Column("id").desc), pages: ItemPages())
        await items.loadNextPage()   // at the end of the list
        await items.refresh()        // pull to refresh: page one again
    }

    static func otherProcesses(store: Store) async throws {
        try await store.refreshFromOtherProcesses()       // returns whether there was a commit
        let watch = Task { await store.watchOtherProcesses(every: .seconds(1)) }
        watch.cancel()
    }

    static func damagedFile(path: String, migrator: DatabaseMigrator, log: (String) -> Void, showBanner: (String) -> Void) throws {
        let store = try Store(
            path: path,
            migrator: migrator,
            onCorruption: .rebuild(keeping: [.table("draft"), .rows(in: "task", where: "isStarred = 1")]))
        if let recovery = store.lastRecovery {
            showBanner(recovery.description)   // "The cache file was damaged and has been rebuilt, keeping 2 pending changes…"
            log("cache rebuilt: \(recovery.error)")   // the SQLite code and statement
        }
        let strict = try Store(path: path, migrator: migrator, onCorruption: .fail)
        _ = (store, strict)
    }
}
