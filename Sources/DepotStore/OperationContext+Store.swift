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
            throw DepotError(.storage, operation: operation, detail: "no store is configured: set NetworkController.Configuration.store")
        }
        return store
    }
}

extension NetworkController.Configuration {
    /// The cache handed to every operation through its context.
    public var store: Store? {
        get { contextValues[StoreKey.self] }
        set { contextValues[StoreKey.self] = newValue }
    }
}

extension NetworkController {
    /// The store this controller hands to its operations, if any.
    public var store: Store? { configuration.store }
}
