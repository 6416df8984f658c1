import Depot
import GRDB

/// A paged list on the server, described for ``PagedResults``: which
/// operation fetches the page at a position, and how to remove rows that
/// only later pages brought when the list starts again from page one.
///
/// It exists so that cursor, page-number and since/before-id APIs page the
/// same way: Depot keeps the position, the pages loaded and which rows each
/// page brought; the endpoint only builds requests and writes rows.
///
/// The contract:
/// - ``operation(for:)`` returns a ``CachingOperation`` whose `write` upserts
///   the page's rows by id (a row already there from an earlier page is
///   updated, not duplicated) and returns ``PageContents``: the ids written,
///   in order, and the next position, or `nil` at the end.
/// - ``removeItems(_:from:)`` deletes the rows with the given ids. Depot calls
///   it inside the transaction that writes a fresh first page, with the ids
///   that earlier pages brought and the first page no longer lists.
///
/// For example, a page-number API answering `{"items": [...], "page": 2, "total": 45}`:
///
/// ```swift
/// struct ItemPages: PageableEndpoint {
///     var pagingKey: String { "items" }
///     var firstPage: PagePosition { .number(1) }
///
///     func operation(for position: PagePosition) throws -> FetchItemPage {
///         FetchItemPage(page: position.number ?? 1)
///     }
///
///     func removeItems(_ ids: [Int], from db: Database) throws {
///         _ = try Item.deleteAll(db, keys: ids)
///     }
/// }
///
/// struct FetchItemPage: CachingOperation {
///     var page: Int
///     var request: NetworkRequest { .get("items", query: ["page": "\(page)"]) }
///
///     func write(_ response: ItemPage, to db: Database) throws -> PageContents<Int> {
///         for item in response.items { try item.upsert(db) }
///         let more = page * ItemPage.size < response.total
///         return PageContents(ids: response.items.map(\.id), next: more ? .number(page + 1) : nil)
///     }
/// }
/// ```
public protocol PageableEndpoint: Sendable {
    /// The identifier of a listed row, as the page's operation reports it.
    associatedtype ItemID: DatabaseValueConvertible & Hashable & Sendable
    /// The operation that fetches and writes one page.
    associatedtype PageOperation: CachingOperation where PageOperation.Written == PageContents<ItemID>

    /// The key the paging state is kept under: the position reached, the
    /// pages loaded and the ids each brought. One key per list.
    var pagingKey: String { get }

    /// The first page's position: `.start`, `.number(1)` or `.number(0)`, say.
    var firstPage: PagePosition { get }

    /// The operation for the page at `position`.
    ///
    /// - Throws: A ``Depot/DepotError`` when the position is one this API
    ///   cannot have given (a cursor it cannot read): paging ends with it.
    func operation(for position: PagePosition) throws -> PageOperation

    /// Deletes the rows with these ids: earlier pages brought them and the
    /// fresh first page no longer lists them. Runs in the first page's transaction.
    func removeItems(_ ids: [ItemID], from db: Database) throws
}

/// What a page's `write` reports: the ids of the rows it wrote, in the
/// server's order, and where the next page starts (`nil`: this was the last).
///
/// For example, from a cursor API:
///
/// ```swift
/// func write(_ page: Wire.Page, to db: Database) throws -> PageContents<String> {
///     for item in page.items { try item.upsert(db) }
///     return PageContents(ids: page.items.map(\.id), next: page.nextCursor.map { .cursor($0) })
/// }
/// ```
public struct PageContents<ID: DatabaseValueConvertible & Hashable & Sendable>: Sendable {
    /// The ids of the rows the page wrote, in order.
    public var ids: [ID]
    /// Where the next page starts, or `nil` when there is no more.
    public var next: PagePosition?

    /// Makes a page's report.
    ///
    /// - Parameters:
    ///   - ids: The ids of the rows the page wrote, in order.
    ///   - next: Where the next page starts, or `nil` when there is no more.
    public init(ids: [ID], next: PagePosition?) {
        self.ids = ids
        self.next = next
    }
}

extension PageableEndpoint {
    /// The ids the loaded pages brought, as a subquery: filter a request
    /// with it to show the paged list's rows only, not other cached rows of
    /// the same table. Results that read it follow the paging state too.
    ///
    /// For example:
    ///
    /// ```swift
    /// let pages = ItemPages()
    /// let items = try controller.pagedResults(
    ///     for: Item.filter(pages.loadedIDs.contains(Column("id"))).order(Column("rank")),
    ///     pages: pages)
    /// ```
    public var loadedIDs: SQLRequest<ItemID> {
        SQLRequest(sql: "SELECT item_id FROM \(PagingTable.items) WHERE paging_key = ?", arguments: [pagingKey])
    }
}
