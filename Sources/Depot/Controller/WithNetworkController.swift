/// Runs `body` with a new controller and shuts it down when `body` returns
/// or throws, the way async-http-client's `withHTTPClient` does.
///
/// For example, a command-line tool:
///
/// ```swift
/// let feed = try await withNetworkController(.init(baseURL: server)) { controller in
///     try await controller.perform(FetchForumFeed())
/// }
/// ```
///
/// The controller is shut down with ``NetworkController/shutdown(grace:)``:
/// operations whose exit policy is `.finish` (a post, say) get `grace` to end;
/// the rest are cancelled at once. Do not keep the controller after `body`
/// returns: every later operation fails with ``DepotError/Code/shutDown``.
///
/// - Parameters:
///   - configuration: What the controller is made from.
///   - grace: How long `.finish` work may go on after `body` (5 seconds).
///   - isolation: Where `body` runs: the caller's actor, by default.
///   - body: Uses the controller.
/// - Returns: What `body` returned.
/// - Throws: What `body` threw, after the shutdown.
public func withNetworkController<Result: Sendable>(
    _ configuration: NetworkController.Configuration,
    grace: Duration = .seconds(5),
    isolation: isolated (any Actor)? = #isolation,
    _ body: (NetworkController) async throws -> Result
) async throws -> Result {
    let controller = NetworkController(configuration: configuration)
    let result: Result
    do {
        result = try await body(controller)
    } catch {
        _ = await controller.shutdown(grace: grace)
        throw error
    }
    _ = await controller.shutdown(grace: grace)
    return result
}
