import Depot
import GRDB

/// One page of a ``PageableEndpoint``, as ``PagedResults`` runs it: the
/// endpoint's operation, whose write is followed, in the same transaction,
/// by the paging bookkeeping (``PagingTable/record``). Everything else is the
/// endpoint operation's: request, validation, parsing, priority, category,
/// offline behaviour, ledger key.
///
/// Pages are always fetched unconditionally: a first page decides which
/// rows later pages keep, so a 304 that confirms one page would say nothing
/// about the rows around it. (The endpoint operation's `prepare` is not
/// called for the same reason: its default adds the ledger's validators.)
struct PageFetch<Endpoint: PageableEndpoint>: CachingOperation {
    typealias Payload = Endpoint.PageOperation.Payload
    typealias Written = PageContents<Endpoint.ItemID>

    let endpoint: Endpoint
    let page: Endpoint.PageOperation
    let position: PagePosition
    /// Which page this is, from 0; page 0 starts the list again.
    let index: Int

    var request: NetworkRequest { page.request }
    var cacheKey: String { page.cacheKey }
    var cacheTags: Set<String> { page.cacheTags }
    var sendsConditionalRequests: Bool { false }
    var priority: Priority { page.priority }
    var category: OperationCategory { page.category }
    var exitPolicy: ExitPolicy { page.exitPolicy }
    var coalescing: Coalescing { page.coalescing }
    var timeout: Timeout { page.timeout }
    var name: String { page.name }
    var offlineBehavior: OfflineBehavior { page.offlineBehavior }
    var isDroppable: Bool { page.isDroppable }
    var retryPolicy: RetryPolicy? { page.retryPolicy }

    func validate(_ response: NetworkResponse) throws {
        try page.validate(response)
    }

    func parse(_ response: NetworkResponse, context: OperationContext) async throws -> Payload {
        try await page.parse(response, context: context)
    }

    func write(_ payload: Payload, to db: Database) throws -> Written {
        let contents = try page.write(payload, to: db)
        try PagingTable.record(
            contents, page: index, at: position, cacheKey: cacheKey, key: endpoint.pagingKey, operation: name,
            remove: { ids in try endpoint.removeItems(ids, from: db) }, in: db)
        return contents
    }
}
