import DemoServer
import Depot
@testable import DepotStore
import Foundation
import GRDB
import Testing

/// Paged results against the depot-server's `/paging/items` (45 items,
/// newest first), on a real store file.
@Suite(.timeLimit(.minutes(1))) @MainActor struct PagedResultsTests {
    func withPaging(_ body: (DemoServer, PagingSetup, Store, NetworkController) async throws -> Void) async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            let folder = try temporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let setup = PagingSetup(folder: folder)
            let store = try setup.store()
            let controller = setup.controller(server.baseURL, store: store)
            // Shut down on failure too: a controller left with keep-alive
            // connections would hold the server's graceful stop forever.
            do {
                try await body(server, setup, store, controller)
            } catch {
                _ = await controller.shutdown(grace: .zero)
                throw error
            }
            // The store is not closed: the results' observations may still be
            // winding down, and the folder goes with its open file all the same.
            _ = await controller.shutdown(grace: .zero)
        }
    }

    /// The ids on screen, once the commits so far are fetched.
    func shown(_ paged: PagedResults<PagedItem>) throws -> [Int] {
        try paged.results.performFetch()
        return paged.fetchedObjects.map(\.id)
    }

    @Test(arguments: [PagingShape.cursor, .number, .beforeID])
    func pagesLoadInOrderToTheEnd(shape: PagingShape) async throws {
        try await withPaging { server, _, _, controller in
            // Given a list whose first page loads when it is made
            let paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: shape, limit: 20))
            await paged.waitForInitialLoad()
            #expect(try shown(paged) == Array((26...45).reversed()))
            #expect(paged.hasMore && paged.pageCount == 1)
            // When the user scrolls to the end twice
            await paged.loadNextPage()
            #expect(try shown(paged) == Array((6...45).reversed()))
            await paged.loadNextPage()
            // Then the whole list is there, in order, and there is no more
            #expect(try shown(paged) == Array((1...45).reversed()))
            #expect(!paged.hasMore && paged.pageCount == 3 && paged.pageError == nil && !paged.isLoadingPage)
            let asked = PagingSetup.served(server)
            await paged.loadNextPage()
            #expect(PagingSetup.served(server) == asked, "no request past the last page")
        }
    }

    @Test func overlappingPagesShowEachRowOnce() async throws {
        try await withPaging { server, _, _, controller in
            // Given page 1 of a page-numbered list (45...26)
            let paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: .number, limit: 20))
            await paged.waitForInitialLoad()
            // When five items arrive on top, page 2 starts with the last five of the old page 1
            try await PagingSetup.addItems(5, with: controller)
            await paged.loadNextPage()
            // Then the union shows each row once, in order
            let ids = try shown(paged)
            #expect(ids == Array((11...45).reversed()))
            #expect(Set(ids).count == ids.count)
            #expect(paged.pageError == nil && paged.hasMore && paged.pageCount == 2)
        }
    }

    /// Whole pages of new items on top of a page-numbered list between two
    /// loads: the next pages answer only rows already shown, and loading
    /// goes on to the first page with rows not shown yet, with no error.
    /// (Page size 10; 1 page loaded and 10 new, or 3 loaded and 20 new.)
    @Test(arguments: [(1, 10), (3, 20)])
    func pagesShiftedWholeByNewItemsOnTopAreSteppedOver(loaded: Int, added: Int) async throws {
        try await withPaging { server, _, _, controller in
            // Given the first pages of a page-numbered list (45...)
            let paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: .number, limit: 10))
            await paged.waitForInitialLoad()
            for _ in 1..<loaded { await paged.loadNextPage() }
            let shownBefore = 10 * loaded
            // When whole pages of items arrive on top, the next pages hold rows already shown
            try await PagingSetup.addItems(added, with: controller)
            let asked = PagingSetup.served(server)
            await paged.loadNextPage()
            // Then the one call loads on to the first page with rows not shown yet
            let repeated = added / 10
            #expect(paged.pageError == nil && paged.hasMore)
            #expect(try shown(paged) == Array((45 - shownBefore - 9...45).reversed()))
            #expect(paged.pageCount == loaded + repeated + 1)
            #expect(PagingSetup.served(server) == asked + repeated + 1)
            // And paging goes on from there
            await paged.loadNextPage()
            #expect(try shown(paged) == Array((max(1, 45 - shownBefore - 19)...45).reversed()))
        }
    }

    @Test func refreshKeepsTheRowsUntilTheFirstPageLandsThenShowsItAlone() async throws {
        try await withPaging { server, _, store, controller in
            // Given three pages on screen (45...16)
            let paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: .cursor, limit: 10))
            await paged.waitForInitialLoad()
            await paged.loadNextPage()
            await paged.loadNextPage()
            let before = try shown(paged)
            #expect(before == Array((16...45).reversed()))

            // When a refresh cannot reach the server (another launch on the same cache, offline), nothing changes
            let offline = PagingSetup(folder: URL(fileURLWithPath: "/")).controller(URL(string: "http://127.0.0.1:9")!, store: store)
            let unreachable = try offline.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: .cursor, limit: 10), policy: .cacheOnly)
            await unreachable.refresh()
            #expect(unreachable.pageError?.code == .offline)
            #expect(try shown(unreachable) == before && unreachable.pageCount == 3 && unreachable.hasMore)
            _ = await offline.shutdown(grace: .zero)

            // When it can, after five new items, every snapshot is the old list or page one alone
            try await PagingSetup.addItems(5, with: controller)
            var seen: [[Int]] = []
            let observation = paged.results.start { update in seen.append(update.snapshot.fetchedObjects.map(\.id)) }
            await paged.refresh()
            let after = try shown(paged)
            observation.cancel()
            // Then the screen holds page one (50...41), and the rows later pages brought are gone from the cache
            #expect(after == Array((41...50).reversed()))
            #expect(seen.allSatisfy { $0 == before || $0 == after }, "\(seen)")
            #expect(try await store.read { db in try PagedItem.fetchCount(db) } == 10)
            #expect(paged.pageCount == 1 && paged.hasMore && paged.pageError == nil)
            // And paging goes on from page one's end
            await paged.loadNextPage()
            #expect(try shown(paged) == Array((31...50).reversed()))
        }
    }

    @Test func anInvalidationStartsTheListOnScreenAgainFromPageOneOnce() async throws {
        try await withPaging { server, _, store, controller in
            // Given three pages on screen (45...16)
            let paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: .cursor, limit: 10))
            await paged.waitForInitialLoad()
            await paged.loadNextPage()
            await paged.loadNextPage()
            #expect(try shown(paged) == Array((16...45).reversed()))
            let status = try #require(paged.syncStatus)
            try await PagingSetup.addItems(5, with: controller)
            let asked = PagingSetup.served(server)

            // When a write elsewhere invalidates every page of the list
            #expect(try await store.ledger.invalidate(.keyPrefix("GET paging/items")) == 3)

            // Then the list starts again from page one, as a pull-to-refresh does, with one request
            for await state in status.updates() where !state.isSyncing && status.refreshCount == 1 { break }
            #expect(try shown(paged) == Array((41...50).reversed()))
            #expect(paged.pageCount == 1 && paged.hasMore && paged.pageError == nil)
            #expect(PagingSetup.served(server) == asked + 1)
            #expect(status.isStale == false)
        }
    }

    @Test func aColdStartOfflineShowsThePagesItHasAndSaysThereAreMore() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            let folder = try temporaryFolder()
            defer { try? FileManager.default.removeItem(at: folder) }
            let setup = PagingSetup(folder: folder)
            // Given a launch that loaded two pages
            do {
                let store = try setup.store()
                let controller = setup.controller(server.baseURL, store: store)
                let paged: PagedResults<PagedItem>
                do {
                    paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: .beforeID, limit: 10))
                } catch {
                    _ = await controller.shutdown(grace: .zero)
                    throw error
                }
                await paged.waitForInitialLoad()
                await paged.loadNextPage()
                #expect(paged.pageCount == 2)
                _ = await controller.shutdown(grace: .zero)
                // Left open, as a launch that is still running: the next one opens the file beside it.
                _ = store
            }
            // When the app starts again with no network (connection refused)
            let store = try setup.store()
            let controller = setup.controller(URL(string: "http://127.0.0.1:9")!, store: store)
            let paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: .beforeID, limit: 10))
            // Then the first frame shows the two pages and knows where they stopped
            #expect(paged.fetchedObjects.map(\.id) == Array((26...45).reversed()))
            #expect(paged.pageCount == 2 && paged.hasMore && paged.nextPage == .before(id: 26))
            await paged.waitForInitialLoad()
            await paged.loadNextPage()
            // And loading more says why it cannot, keeping the rows and the promise of more
            #expect(paged.pageError?.code == .offline)
            #expect(paged.hasMore && paged.pageCount == 2 && !paged.isLoadingPage)
            #expect(try shown(paged) == Array((26...45).reversed()))
            _ = await controller.shutdown(grace: .zero)
        }
    }

    @Test(arguments: [
        (PagingShape.number, "repeat", "5 pages in a row repeat rows earlier pages brought"),
        (PagingShape.beforeID, "repeat", "is one already loaded"),
        (PagingShape.cursor, "empty", "empty but says there are more"),
        (PagingShape.cursor, "badcursor", "cursor is empty"),
    ])
    func aPageThatMakesNoProgressEndsPagingWithAnError(shape: PagingShape, fault: String, message: String) async throws {
        try await withPaging { server, _, _, controller in
            // Pages of 5 for page numbers: the repeats stay short of the total's last page.
            let limit = shape == .number ? 5 : 10
            let paged = try controller.pagedResults(for: PagedItem.newestFirst, pages: PagedItemsEndpoint(shape: shape, limit: limit, fault: fault))
            await paged.waitForInitialLoad()
            if fault == "badcursor" {
                // The first page itself names a malformed next page: it does not land.
                #expect(paged.pageError?.code == .invalidPage)
                #expect("\(paged.pageError.map(String.init(describing:)) ?? "")".contains(message))
                #expect(!paged.hasMore && paged.pageCount == 0)
                return
            }
            #expect(paged.pageCount == 1 && paged.hasMore)
            // When the server answers the next page badly
            await paged.loadNextPage()
            // Then paging ends with a clear error, the bad page rolled back
            // (a page that repeats earlier rows is taken for a shifted list
            // a few times first)
            let error = try #require(paged.pageError)
            #expect(error.code == .invalidPage)
            #expect("\(error)".contains(message), "\(error)")
            #expect(!paged.hasMore && paged.pageCount == (shape == .number ? 1 + PagingTable.repeatedPagesAllowed : 1))
            #expect(try shown(paged) == Array((46 - limit...45).reversed()))
            // And asking again does not loop
            let asked = PagingSetup.served(server)
            await paged.loadNextPage()
            await paged.loadNextPage()
            #expect(PagingSetup.served(server) == asked)
        }
    }
}
