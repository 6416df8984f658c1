extension DemoServer {
    /// The conditions that apply to requests for `path` now.
    public func currentConditions(for path: String) -> NetworkConditions { state.conditions(for: path) }

    /// The headers the second listener received last (after ``Fault/redirectCrossOrigin``).
    public var crossOriginHeaders: [String: String]? { state.crossOriginHeaders.withLock { $0 } }

    /// Opens the gate `name`: requests waiting at ``Fault/gated(_:)`` with that
    /// name are answered, and so is every later one.
    ///
    /// For example:
    ///
    /// ```swift
    /// let ticket = controller.enqueue(FetchHello(path: DemoServer.Fault.gated("slot").path))
    /// // ... the request is held on the server ...
    /// server.openGate("slot")
    /// ```
    public func openGate(_ name: String) { state.gates.open(name) }

    /// How many requests have arrived for `fault`'s path, with any query and any
    /// method, counted on arrival (a request still waiting at a gate counts).
    public func requestCount(for fault: Fault) -> Int {
        state.requestLog.entry(for: fault.pathWithoutQuery)?.count ?? 0
    }

    /// The headers of the last request for `fault`'s path, names lower-cased,
    /// or `nil` if none has arrived.
    public func lastRequestHeaders(for fault: Fault) -> [String: String]? {
        state.requestLog.entry(for: fault.pathWithoutQuery)?.lastHeaders
    }

    /// The paths (without query) of responses whose client went away before
    /// their body ended, oldest first. Only ``Fault/huge`` records this today.
    public var abandonedResponses: [String] { state.requestLog.abandoned }

    /// Returns once a client has abandoned a response to `fault` mid-body (at
    /// once if one already has), or when the task is cancelled or the server stops.
    public func waitUntilAbandoned(_ fault: Fault) async {
        await state.requestLog.waitUntilAbandoned(path: fault.pathWithoutQuery)
    }
}
