import Depot
import DepotStore
import Foundation
import GRDB

/// One page of a list for ``ListPages``: ``FetchList``'s request, ledger key
/// and write, reporting the ids it wrote and the next page number.
///
/// For example:
///
/// ```swift
/// let page = try await controller.perform(FetchListPage(FetchList(.contacts, page: 2)))
/// print(page.written?.next ?? "the last page")
/// ```
public struct FetchListPage: CachingOperation {
    /// The page fetched.
    public let list: FetchList

    /// Makes the operation for the page `list` names.
    public init(_ list: FetchList) {
        self.list = list
    }

    /// ``FetchList/request``.
    public var request: NetworkRequest { list.request }
    /// ``FetchList/cacheKey``: the page's ledger entry is the same either way.
    public var cacheKey: String { list.cacheKey }
    /// ``FetchList/cacheTags``: a new contact invalidates the pages loaded.
    public var cacheTags: Set<String> { list.cacheTags }
    /// Data work, held until a sign-in succeeds.
    public var category: OperationCategory { list.category }
    /// `.failFast`: offline, the pages loaded stay and the list says why no more come.
    public var offlineBehavior: OfflineBehavior { list.offlineBehavior }

    /// Checks the status; a refusal carries the server's reasons.
    public func validate(_ response: NetworkResponse) throws {
        try list.validate(response)
    }

    /// Decodes the page off the database.
    public func parse(_ response: NetworkResponse, context: OperationContext) async throws -> FetchedPage {
        try await list.parse(response, context: context)
    }

    /// Writes the page as ``FetchList`` does (a record listed on an earlier
    /// page moves here, so overlapping pages show it once).
    /// - Returns: The ids, and page N + 1 while the server's total goes beyond this page.
    public func write(_ fetched: FetchedPage, to db: Database) throws -> PageContents<Int> {
        _ = try list.write(fetched, to: db)
        let next = list.page < fetched.info.pageCount ? PagePosition.number(list.page + 1) : nil
        return PageContents(ids: fetched.items.map(\.id), next: next)
    }
}

/// A list of one kind, page by page, as an infinite list: the endpoint of
/// ``SenbeiApp/pagedList(_:perPage:policy:)``.
public struct ListPages: PageableEndpoint {
    /// The kind listed.
    public let kind: EntityKind
    /// Records per page.
    public let perPage: Int

    /// Makes the endpoint for `kind`.
    public init(_ kind: EntityKind, perPage: Int = FetchList.defaultPerPage) {
        self.kind = kind
        self.perPage = max(1, min(perPage, 100))
    }

    /// `senbei:<kind>:pages:per_page=M`.
    public var pagingKey: String { "senbei:\(kind.rawValue):pages:per_page=\(perPage)" }
    /// Page 1.
    public var firstPage: PagePosition { .number(1) }

    /// The page at `.number(N)`.
    /// - Throws: `.invalidPage` for any other position.
    public func operation(for position: PagePosition) throws -> FetchListPage {
        guard let page = position.number, page >= 1 else {
            throw DepotError(.invalidPage, detail: "Senbei lists page by number, not by \(position)")
        }
        return FetchListPage(FetchList(kind, page: page, perPage: perPage))
    }

    /// Deletes the server's records a fresh first page no longer reaches
    /// (records created here and not yet sent stay).
    public func removeItems(_ ids: [Int], from db: Database) throws {
        _ = try Entity.filter(Column("kind") == kind.rawValue && ids.contains(Column("id")) && Column("pending") == nil).deleteAll(db)
    }

    /// The rows of the pages loaded, in the server's order, after the
    /// records created here and not yet sent.
    public var listed: QueryInterfaceRequest<Entity> {
        Entity.filter(Column("kind") == kind.rawValue && (Column("pending") != nil || loadedIDs.contains(Column("id"))))
            .order(Column("page"), Column("position"), Column("id"))
    }
}

extension SenbeiApp {
    /// `kind` as an infinite list: the pages loaded so far (on a later launch
    /// too, offline too), then the next with ``DepotStore/PagedResults/loadNextPage()``.
    /// Sign in first (``login()``): pages are data work, held until then.
    ///
    /// For example:
    ///
    /// ```swift
    /// try await app.login()
    /// let contacts = try app.pagedList(.contacts)
    /// await contacts.loadNextPage()
    /// print(contacts.fetchedObjects.count, contacts.hasMore ? "and more" : "in all")
    /// ```
    ///
    /// - Parameters:
    ///   - kind: What to list.
    ///   - perPage: Records per page.
    ///   - policy: When to load the first page again. Default: ``listPolicy``.
    public func pagedList(_ kind: EntityKind, perPage: Int = FetchList.defaultPerPage, policy: CachePolicy = SenbeiApp.listPolicy) throws(DepotError) -> PagedResults<Entity> {
        let pages = ListPages(kind, perPage: perPage)
        return try controller.pagedResults(for: pages.listed, pages: pages, policy: policy)
    }

    /// Signs in if nobody is, then loads the next page of `list` (made by
    /// ``pagedList(_:perPage:policy:)``). The page's failures are in the
    /// list's ``DepotStore/PagedResults/pageError``.
    ///
    /// - Throws: Why the sign-in failed; the list then stays as it is.
    public func loadMore(_ list: PagedResults<Entity>) async throws(DepotError) {
        if profile == nil { try await login() }
        await list.loadNextPage()
    }
}
