import Depot
import DepotStore
import Foundation
import GRDB
import Synchronization

/// Stores for tests: fresh files in a temporary folder, or copies of a
/// database file committed with the tests, so every test starts from a known
/// SQLite file and none changes the committed one.
///
/// For example:
///
/// ```swift
/// let seed = Bundle.module.url(forResource: "seed", withExtension: "sqlite")!
/// try await StoreFixtures.withStore(copying: seed, migrator: .contacts) { store in
///     // run an operation, then read the rows it left
/// }
/// ```
public enum StoreFixtures {
    /// Copies `seed` into a new temporary folder, opens the copy, runs `body`,
    /// then deletes the folder.
    ///
    /// - Parameters:
    ///   - seed: A SQLite file (committed with the tests), or `nil` for a new, empty one.
    ///   - migrator: The app's migrations; pending ones run on the copy.
    ///   - environment: The wall date for the ledger and the clock (the controller's).
    ///   - isolation: The caller's actor, which `body` runs on.
    ///   - body: The test's work with the store; the store is closed after it.
    public static func withStore<T>(
        copying seed: URL? = nil,
        migrator: DatabaseMigrator = DatabaseMigrator(),
        environment: DepotEnvironment = .live,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Store) async throws -> T
    ) async throws -> T {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try open(in: folder, copying: seed, migrator: migrator, environment: environment)
        let result: Result<T, any Error>
        do {
            result = .success(try await body(store))
        } catch {
            result = .failure(error)
        }
        try? await store.close()
        return try result.get()
    }

    /// Opens a store in a new temporary folder, copying `seed` first if given.
    /// The caller deletes the folder (``/DepotStore/Store/path``'s parent) when done.
    public static func temporaryStore(
        copying seed: URL? = nil,
        migrator: DatabaseMigrator = DatabaseMigrator(),
        environment: DepotEnvironment = .live
    ) throws -> Store {
        try open(in: temporaryFolder(), copying: seed, migrator: migrator, environment: environment)
    }

    /// Runs one operation through a real ``/Depot/NetworkController`` whose every
    /// request is answered with the file at `response`, writing into `store`.
    ///
    /// For example:
    ///
    /// ```swift
    /// try await StoreFixtures.withStore(migrator: .contacts) { store in
    ///     let contacts = Bundle.module.url(forResource: "contacts", withExtension: "json")!
    ///     _ = try await StoreFixtures.perform(SyncContacts(), respondingWith: contacts, in: store)
    ///     #expect(try await store.read { try CachedContact.fetchCount($0) } == 20)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - operation: The operation under test.
    ///   - response: A file whose bytes are the response body.
    ///   - status: The status to answer with.
    ///   - headers: Extra response headers (an `ETag`, say).
    ///   - store: The store the operation writes to.
    @discardableResult
    public static func perform<Operation: NetworkOperation>(
        _ operation: Operation,
        respondingWith response: URL,
        status: Int = 200,
        headers: HeaderFields = [:],
        in store: Store
    ) async throws(DepotError) -> Operation.Output {
        let transport = FixtureTransport()
        transport.respondToOtherPaths(with: .file(response, status: status, headers: headers))
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://fixtures.test/")!, transport: transport)
        configuration.store = store
        let controller = NetworkController(configuration: configuration)
        defer { Task { _ = await controller.shutdown(grace: .zero) } }
        return try await controller.perform(operation)
    }

    private static func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appending(path: "depot-store-\(UUID().uuidString)", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    private static func open(in folder: URL, copying seed: URL?, migrator: DatabaseMigrator, environment: DepotEnvironment) throws -> Store {
        let file = folder.appending(path: "store.sqlite")
        if let seed {
            try FileManager.default.copyItem(at: seed, to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        }
        return try Store(path: file.path, migrator: migrator, environment: environment)
    }
}

/// A wall clock that moves only when told: inject ``provider`` as a
/// ``/Depot/DepotEnvironment``'s `date`, for the store and the controller.
public final class ManualDate: Sendable {
    private let date: Mutex<Date>

    /// Starts at `date` (by default 2026-01-01 00:00:00 UTC).
    public init(_ date: Date = Date(timeIntervalSince1970: 1_767_225_600)) {
        self.date = Mutex(date)
    }

    /// The current date.
    public var now: Date { date.withLock { $0 } }

    /// A closure returning the current date, for `DepotEnvironment(date:)`.
    public var provider: @Sendable () -> Date { { self.now } }

    /// Moves the date forward by `seconds`.
    public func advance(by seconds: TimeInterval) {
        date.withLock { $0 += seconds }
    }
}
