import Depot

/// The context key under which the controller hands its ``Store`` to operations.
enum StoreKey: OperationContextKey {
    static let defaultValue: Store? = nil
}

extension OperationContext {
    /// The store configured on the controller, if any.
    ///
    /// For example, an operation that writes without ``CachingOperation``:
    ///
    /// ```swift
    /// func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int {
    ///     let items = try response.decode([Item].self)
    ///     return try await context.requireStore(for: name).write { db in
    ///         for item in items { try item.upsert(db) }
    ///         return items.count
    ///     }
    /// }
    /// ```
    public var store: Store? { self[StoreKey.self] }

    /// The configured store, or a `.storage` error that names the operation.
    public func requireStore(for operation: String? = nil) throws(DepotError) -> Store {
        guard let store else {
            throw DepotError(.storage, operation: operation, detail: "this operation's context has no store: set Configuration.store on the controller, or OperationContextValues.store for a direct call")
        }
        return store
    }
}

extension OperationContextValues {
    /// The cache operations write to.
    ///
    /// For example, to call a caching operation's `process` directly in a test:
    ///
    /// ```swift
    /// var values = OperationContextValues()
    /// values.store = store
    /// let update = try await FetchContacts().process(response, context: OperationContext(values: values))
    /// ```
    public var store: Store? {
        get { self[StoreKey.self] }
        set { self[StoreKey.self] = newValue }
    }
}

extension NetworkController.Configuration {
    /// The cache handed to every operation through its context.
    public var store: Store? {
        get { contextValues.store }
        set { contextValues.store = newValue }
    }
}

extension NetworkController {
    /// Makes a controller whose operations, results and sync statuses use
    /// `store`: the same as setting ``Depot/NetworkController/Configuration/store``
    /// before making it. (`Configuration` lives in Depot, which does not know
    /// the store, so its initializer cannot take one.)
    ///
    /// For example:
    ///
    /// ```swift
    /// let store = try Store(path: cacheURL.path, migrator: migrator)
    /// let controller = NetworkController(configuration: .init(baseURL: serverURL), store: store)
    /// ```
    public convenience init(configuration: Configuration, store: Store) {
        var configuration = configuration
        configuration.store = store
        self.init(configuration: configuration)
    }

    /// The store this controller hands to its operations, if any.
    public var store: Store? { configuration.store }
}
