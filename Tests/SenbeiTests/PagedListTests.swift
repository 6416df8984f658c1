import CLITestSupport
import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotStore
import DepotTesting
import Foundation
import GRDB
import SenbeiKit
import Testing

/// Contacts and leads as infinite lists over the server's page-numbered lists.
@Suite(.timeLimit(.minutes(2)))
@MainActor
struct PagedListTests {
    /// `POST /contacts` from another client (HTTP Basic): a contact on top of the list.
    struct AddContact: NetworkOperation {
        typealias Output = NetworkResponse
        var name: String
        var request: NetworkRequest {
            .post("contacts", json: ["name": name], headers: ["Authorization": "Basic " + Data("admin:secret".utf8).base64EncodedString()])
        }

        static func send(_ name: String, to server: DemoServer) async throws {
            let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil)))
            _ = try await controller.perform(AddContact(name: name))
            _ = await controller.shutdown(grace: .zero)
        }
    }

    func ids(_ list: PagedResults<Entity>) throws -> [Int] {
        try list.results.performFetch()
        return list.fetchedObjects.map(\.id)
    }

    @Test func contactsScrollToTheEndShowingShiftedRowsOnceThenRefreshStartsAgain() async throws {
        try await withSenbei { f in
            // Given page 1 of the contacts, fifteen a page (51 in all)
            try await f.app.login()
            let contacts = try f.app.pagedList(.contacts, perPage: 15)
            await contacts.waitForInitialLoad()
            #expect(try ids(contacts) == Array(1...15))

            // When three contacts are created elsewhere, page 2 starts with the last three of the old page 1
            for name in ["Zed One", "Zed Two", "Zed Three"] { try await AddContact.send(name, to: f.server) }
            try await f.app.loadMore(contacts)

            // Then each contact shows once, in the server's order
            #expect(try ids(contacts) == Array(1...27))
            #expect(contacts.pageError == nil && contacts.hasMore)
            try await f.app.loadMore(contacts)
            try await f.app.loadMore(contacts)
            #expect(try ids(contacts) == Array(1...51))
            #expect(!contacts.hasMore && contacts.pageCount == 4)

            // And pull-to-refresh shows page 1 alone, the new contacts first
            await contacts.refresh()
            let refreshed = try ids(contacts)
            #expect(refreshed.count == 15 && Array(refreshed.suffix(12)) == Array(1...12))
            #expect(refreshed.prefix(3).allSatisfy { $0 > 10_000 })
            #expect(try await f.store.read { db in try Entity.filter(Column("kind") == "contacts").fetchCount(db) } == 15)
            #expect(contacts.hasMore && contacts.pageCount == 1)
        }
    }

    @Test func aLaterLaunchOfflineShowsTheLeadsItLoadedAndThatMoreAreOnTheServer() async throws {
        try await withSenbei { f in
            // Given two pages of leads loaded (62 in all)
            try await f.app.login()
            let leads = try f.app.pagedList(.leads)
            await leads.waitForInitialLoad()
            try await f.app.loadMore(leads)
            #expect(try ids(leads).count == 40)

            try await f.withOfflineApp { app in
                // When the app starts again with no network
                let later = try app.pagedList(.leads)
                // Then it shows the forty leads, knows where it stopped, and says there are more
                #expect(later.fetchedObjects.count == 40)
                #expect(later.pageCount == 2 && later.hasMore && later.nextPage == .number(3))
                await later.waitForInitialLoad()
                // And loading more says it cannot reach the server, keeping the rows
                let error = try await #require(throws: DepotError.self) { try await app.loadMore(later) }
                #expect([.offline, .connectionLost].contains(error.code))
                #expect(try ids(later).count == 40 && later.hasMore)
            }
        }
    }
}

/// `senbei leads --more`, run after run, then offline.
@Suite(.timeLimit(.minutes(2)))
struct PagedListCommandLineTests {
    @Test func leadsMoreGrowsTheListRunByRunAndOfflineShowsWhatItHas() async throws {
        let folder = try Executables.temporaryFolder("senbei-cli")
        defer { try? FileManager.default.removeItem(at: folder) }
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            // Given a first run, which loads page 1
            let first = try await CommandLineTests.senbei(["leads", "--more"], server: server, folder: folder)
            #expect(first.status == 0, "\(first.error)")
            let firstLines = first.output.split(separator: "\n")
            #expect(firstLines.first == "Leads · 20 shown, 1 page loaded · more on the server: senbei leads --more", "\(first.output)")
            #expect(firstLines.count == 21)
            // When it runs again, it goes on from where the first stopped
            let second = try await CommandLineTests.senbei(["leads", "--more"], server: server, folder: folder)
            #expect(second.status == 0, "\(second.error)")
            #expect(second.output.split(separator: "\n").first == "Leads · 40 shown, 2 pages loaded · more on the server: senbei leads --more", "\(second.output)")
            #expect(second.output.split(separator: "\n").count == 41)
            #expect(CommandLineTests.requests(server, "GET /leads") == 2)
        }
        // Then offline it shows the forty leads and says more are on the server
        let offline = try await Executables.run("senbei", ["leads", "--more", "--server", "http://127.0.0.1:9", "--cache", folder.appending(path: "cache.sqlite").path])
        #expect(offline.status == 0, "\(offline.error)")
        #expect(offline.output.split(separator: "\n").first == "Leads · 40 shown, 2 pages loaded · offline — more on the server, not loaded", "\(offline.output)")
        #expect(offline.output.split(separator: "\n").count == 41)
    }
}
