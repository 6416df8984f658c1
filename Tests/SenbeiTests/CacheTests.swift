import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// Pagination and freshness: a page is its own cache entry, fresh for five
/// minutes of the controller's wall clock (a `ManualDate` here, never a sleep).
@Suite(.timeLimit(.minutes(2)))
@MainActor
struct CacheTests {
    @Test func aFreshPageComesFromTheCacheWithoutASecondRequest() async throws {
        let date = ManualDate()
        try await withSenbei(date: date) { f in
            // Given page 2 fetched once
            let first = try await f.app.loadPage(.contacts, page: 2)
            #expect(first.source == .network)
            #expect(first.info.page == 2 && first.items.count == 20)
            #expect(first.items.map(\.id) == Array(21...40))
            #expect(f.served("GET /contacts") == 1)

            // When it is asked for again within five minutes
            date.advance(by: 299)
            f.log.clear()
            let second = try await f.app.loadPage(.contacts, page: 2)

            // Then it comes from the cache: same rows, no request, no announcement
            #expect(second.source == .cache)
            #expect(second.items == first.items)
            #expect(second.lastSynced == first.lastSynced)
            #expect(f.served("GET /contacts") == 1)
            #expect(f.log.names.isEmpty)

            // And another page is another entry
            let pageOne = try await f.app.loadPage(.contacts, page: 1)
            #expect(pageOne.source == .network && pageOne.items.map(\.id) == Array(1...20))
            #expect(f.served("GET /contacts") == 2)
        }
    }

    @Test func pageCountsCoverTheTotalAndNeverOverflow() {
        #expect(PageInfo(kind: .contacts, page: 1, perPage: 20, total: 0).pageCount == 1)
        #expect(PageInfo(kind: .contacts, page: 1, perPage: 20, total: 40).pageCount == 2)
        #expect(PageInfo(kind: .contacts, page: 1, perPage: 20, total: 41).pageCount == 3)
        // A server's total near Int.max (or a per-page of 0) is shown, not a trap.
        #expect(PageInfo(kind: .contacts, page: 1, perPage: 20, total: .max).pageCount == Int.max / 20 + 1)
        #expect(PageInfo(kind: .contacts, page: 1, perPage: 0, total: 5).pageCount == 5)
    }

    /// Offline-first for tasks, comments and activities too: the rows fetched
    /// last, marked offline with their age, and no "retrieved" notification.
    @Test func offlineTasksCommentsAndActivitiesComeFromTheCache() async throws {
        let date = ManualDate()
        try await withSenbei(date: date) { f in
            let subject = Commentable(.contacts, 3)
            _ = try await f.app.sent(f.app.postComment(on: subject, text: "Left a message"))
            let tasks = try await f.app.loadTasks()
            let comments = try await f.app.loadComments(on: subject)
            let activities = try await f.app.loadActivities()
            #expect(tasks.source == .network && comments.source == .network && activities.source == .network)
            #expect(!tasks.rows.isEmpty && comments.rows.count == 1 && !activities.rows.isEmpty)
            let synced = date.now
            date.advance(by: 3_600)

            // A new session on the same cache, its server unreachable (connection refused).
            let credentials = SenbeiCredentials(username: "admin", password: "secret")
            var configuration = SenbeiApp.configuration(server: URL(string: "http://127.0.0.1:9")!, transport: AsyncHTTPClientTransport(), store: f.store, notificationCenter: nil)
            configuration.environment.date = date.provider
            let controller = NetworkController(configuration: configuration)
            let log = NotificationLog()
            let app = try SenbeiApp(controller: controller, credentials: credentials, notificationCenter: log.center)

            let offlineTasks = try await app.loadTasks()
            #expect(offlineTasks == CachedRows(rows: tasks.rows, source: .offline, lastSynced: synced))
            let offlineComments = try await app.loadComments(on: subject)
            #expect(offlineComments == CachedRows(rows: comments.rows, source: .offline, lastSynced: synced))
            let offlineActivities = try await app.loadActivities()
            #expect(offlineActivities == CachedRows(rows: activities.rows, source: .offline, lastSynced: synced))
            #expect(!log.names.contains(.senbeiDidRetrieveTasks) && !log.names.contains(.senbeiDidRetrieveComments) && !log.names.contains(.senbeiDidRetrieveActivities), "\(log.names)")

            // The CLI's lines start with the note
            let lines = SenbeiPresentation.lines(offlineTasks, now: date.now) { $0.map(\.name) }
            #expect(lines.first?.hasPrefix("offline — showing cached data from ") == true && lines.first?.hasSuffix(" (1 h ago)") == true, "\(lines)")
            #expect(Array(lines.dropFirst()) == tasks.rows.map(\.name))

            // Comments never fetched fail with the reason
            let error = await #expect(throws: DepotError.self) { try await app.loadComments(on: Commentable(.contacts, 4)) }
            #expect(error?.code == .offline)
            _ = await app.shutdown(grace: .zero)
        }
    }

    /// Offline-first: with no server to ask, a stale page still shows, and says
    /// how old it is; a page never fetched fails with the reason.
    @Test func offlineAStalePageComesFromTheCacheWithItsAge() async throws {
        let date = ManualDate()
        try await withSenbei(date: date) { f in
            _ = try await f.app.loadPage(.contacts, page: 2)
            date.advance(by: 3_600)

            // A new session on the same cache, its server unreachable (connection refused).
            let credentials = SenbeiCredentials(username: "admin", password: "secret")
            var configuration = SenbeiApp.configuration(server: URL(string: "http://127.0.0.1:9")!, transport: AsyncHTTPClientTransport(), store: f.store, notificationCenter: nil)
            configuration.environment.date = date.provider
            let controller = NetworkController(configuration: configuration)
            let app = try SenbeiApp(controller: controller, credentials: credentials, notificationCenter: NotificationCenter())
            let page = try await app.loadPage(.contacts, page: 2)
            #expect(page.source == .offline)
            #expect(page.items.map(\.id) == Array(21...40))
            let heading = SenbeiPresentation.pageLines(page, now: date.now).first ?? ""
            // "… from HH:MM (1 h ago)"; the clock time is in the machine's time zone
            // (its format is checked against literals in NerdfeedTests.PresentationTests).
            #expect(heading.contains(/offline — showing cached data from \d\d:\d\d \(1 h ago\)$/), "\(heading)")

            let error = await #expect(throws: DepotError.self) { try await app.loadPage(.contacts, page: 3) }
            #expect(error?.code == .offline)
            _ = await app.shutdown(grace: .zero)
        }
    }

    /// A signed-in session whose server stops answering shows the cached page
    /// too: lists fail fast offline, they never wait for the network.
    @Test func aSignedInSessionThatLosesItsServerShowsTheCachedPage() async throws {
        let date = ManualDate()
        try await withSenbei(date: date) { f in
            _ = try await f.app.loadPage(.contacts, page: 2)
            date.advance(by: 600)
            try await f.setOffline(true)
            let page = try await f.app.loadPage(.contacts, page: 2)
            #expect(page.source == .offline)
            #expect(page.items.map(\.id) == Array(21...40))
            #expect(f.log.names.filter { $0 == .senbeiDidRetrieveContacts }.count == 1, "an offline page is not announced as retrieved")
        }
    }

    @Test func aStalePageOrAnExplicitRefreshAsksTheServer() async throws {
        let date = ManualDate()
        try await withSenbei(date: date) { f in
            _ = try await f.app.loadPage(.leads, page: 3)
            #expect(f.served("GET /leads") == 1)

            // Older than five minutes: fetched again
            date.advance(by: 301)
            let stale = try await f.app.loadPage(.leads, page: 3)
            #expect(stale.source == .network)
            #expect(f.served("GET /leads") == 2)

            // Fresh, but the user asked
            let refreshed = try await f.app.loadPage(.leads, page: 3, refresh: true)
            #expect(refreshed.source == .network)
            #expect(f.served("GET /leads") == 3)
            #expect(refreshed.info.pageCount == (refreshed.info.total + 19) / 20)
        }
    }

    @Test func aPageWrittenAgainReplacesItsRowsOnly() async throws {
        try await withSenbei { f in
            _ = try await f.app.loadPage(.campaigns, page: 1)
            _ = try await f.app.loadPage(.campaigns, page: 2)
            _ = try await f.app.loadPage(.campaigns, page: 1, refresh: true)
            let counts = try await f.store.read { db in
                (try Entity.onPage(.campaigns, 1).fetchCount(db), try Entity.onPage(.campaigns, 2).fetchCount(db),
                 try Entity.filter(Column("kind") == "campaigns").fetchCount(db))
            }
            #expect(counts.0 == 20 && counts.1 == 20 && counts.2 == 40)
        }
    }
}
