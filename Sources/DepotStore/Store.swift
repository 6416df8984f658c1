import Depot
import Foundation
import GRDB
import Synchronization

/// The local SQLite cache that operations write into and the view layer reads from.
///
/// A store wraps a GRDB `DatabasePool` (WAL mode, concurrent reads) on a file the
/// app chooses, or an in-memory `DatabaseQueue` for previews and tests. The app
/// registers its own schema as a GRDB `DatabaseMigrator`; the store adds the
/// ``SyncLedger`` table of its own.
///
/// Operations reach the store through their context (``Depot/OperationContext/store``),
/// which is the design's "inject access to our cache into the operation":
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.registerMigration("songs") { db in
///     try db.create(table: "song") { t in
///         t.primaryKey("id", .text)
///         t.column("title", .text).notNull()
///     }
/// }
/// let store = try Store(path: cacheFolder.appending(path: "cache.sqlite").path, migrator: migrator)
///
/// var configuration = NetworkController.Configuration(baseURL: api)
/// configuration.store = store
/// let controller = NetworkController(configuration: configuration)
/// ```
public final class Store: Sendable {
    /// The database. Read it freely; write through operations so that every
    /// change arrives in one transaction with its ledger entry.
    public let writer: any DatabaseWriter

    /// The descriptor that took turns with other processes at open; kept
    /// open as long as the database is (declared after `writer`, so it goes after it).
    private let openingLock: OpeningLock?

    /// The wall date the ledger records and freshness is judged by, and the
    /// clock that ``watchOtherProcesses(every:)`` sleeps on: give the
    /// controller the same one.
    public let environment: DepotEnvironment

    /// The environment's wall date now.
    func currentDate() -> Date { environment.date() }

    /// The mutation types an ``Outbox`` on this store registered: caching
    /// operations re-apply pending optimistic changes after their writes.
    let mutationTypes = Mutex<[String: any Mutation.Type]>([:])

    /// Where a ``StreamingCachingOperation``'s body waits for its write past
    /// its first megabyte (``BodySpool``): the temporary folder; tests move it.
    let bodySpoolFolder = Mutex(FileManager.default.temporaryDirectory)

    /// Runs the retention the store was opened with; `nil` without one.
    let evictor: Evictor?

    /// What live results show, for ``RetentionReference/results``.
    let liveResults = LiveResults()

    /// Refreshes the live results after each commit.
    let fanout: CommitFanout

    /// Set when ``close()`` begins: what fails from then on failed because of it.
    private let closeBegan = Atomic<Bool>(false)

    /// Whether ``close()`` was called (and has not failed): reads and writes
    /// fail once it has closed the database, and some may already.
    var isClosing: Bool { closeBegan.load(ordering: .acquiring) }

    /// Where this store's closes wait, one after another: off the
    /// cooperative pool, and never two in GRDB's `close()` at once.
    private let closeQueue = DispatchQueue(label: "Depot.Store.close")

    /// The writer connection's `PRAGMA data_version` when it last looked: it
    /// changes when another connection (another process) commits.
    private let seenDataVersion: Mutex<Int>

    /// Run once ``close()`` has closed the database.
    private let closeHandlers = Mutex<[@Sendable () -> Void]>([])

    /// Runs `handler` once the database is closed (an outbox tells its waiters).
    func whenClosed(_ handler: @escaping @Sendable () -> Void) {
        closeHandlers.withLock { $0.append(handler) }
    }

    /// How long a connection waits for another process's lock (an app and
    /// its extension, two command-line runs) before it reports "database is
    /// locked", when the configuration does not say.
    public static let defaultBusyTimeout: TimeInterval = 10

    /// Opens (or creates) the database file at `path` and migrates it.
    ///
    /// A new file is created with permissions 0600 (owner read and write
    /// only): a cache often holds personal data. An existing file with looser
    /// permissions, and its `-wal` and `-shm` files, are tightened to 0600.
    ///
    /// A file that a newer version of the app migrated (it holds migrations
    /// a non-empty `migrator` does not know) is read and written as far as
    /// its tables allow: ``newerMigrations`` lists what this version does not
    /// know, and a read or write that the newer tables refuse fails with a
    /// `.storage` error whose ``Depot/DepotError/storageProblem`` is
    /// ``Depot/DepotError/StorageProblem/newerSchema``.
    ///
    /// Several processes may share the file: every connection waits up to
    /// ``defaultBusyTimeout`` for another's lock (unless `configuration` sets
    /// its own `busyMode`), and so do the open and the migration.
    ///
    /// A file the process cannot write (a read-only file system, a file
    /// without write permission) opens read-only, if its schema is current:
    /// ``isReadOnly`` is `true`, reads show what it holds, and writes fail
    /// with `.storage`.
    ///
    /// A damaged file is rebuilt, keeping what cannot be fetched again, unless
    /// `onCorruption` says ``CorruptionPolicy/fail``: ``lastRecovery`` then
    /// tells what happened.
    ///
    /// - Parameters:
    ///   - path: The database file. Its folder must exist.
    ///   - migrator: The app's schema.
    ///   - configuration: GRDB's configuration, for tracing or a busy timeout.
    ///   - retention: What eviction keeps (see ``Retention``). The policies
    ///     are checked against the migrated schema here, and a first
    ///     eviction starts in the background.
    ///   - onCorruption: What to do when the file is damaged, at open or
    ///     during use: rebuild it (the default), or fail.
    ///   - environment: The wall date for `lastSynced` and freshness, and the
    ///     clock for polling: the controller's. Inject one in tests.
    public init(
        path: String,
        migrator: DatabaseMigrator = DatabaseMigrator(),
        configuration: GRDB.Configuration = GRDB.Configuration(),
        retention: Retention? = nil,
        onCorruption: CorruptionPolicy = .rebuild(),
        environment: DepotEnvironment = .live
    ) throws(DepotError) {
        let opening = StoreOpening(
            path: path, migrator: migrator, configuration: configuration,
            retention: retention, onCorruption: onCorruption, date: environment.date)
        let opened = try opening.openStore()
        self.writer = opened.writer
        self.openingLock = opened.lock
        self.isReadOnly = opened.isReadOnly
        self.newerMigrations = opened.newerMigrations
        self.filePath = path
        do {
            self.seenDataVersion = Mutex(try opened.writer.writeWithoutTransaction(Self.dataVersion))
        } catch {
            throw DepotError.opening(error, path: path)
        }
        self.fanout = Self.startFanout(on: opened.writer)
        self.environment = environment
        self.recoveryCenter = RecoveryCenter(opening: opening, last: opened.recovery)
        // A read-only file keeps what it holds: nothing to evict.
        self.evictor = opened.isReadOnly ? nil : try Self.startRetention(retention, on: writer)
        evictor?.start(self)
        if let recovery = opened.recovery { announce(recovery) }
    }

    /// The writer keeps its observers weakly (the store keeps the fan-out), so
    /// that a released store releases its pool.
    private static func startFanout(on writer: any DatabaseWriter) -> CommitFanout {
        let fanout = CommitFanout(writer: writer)
        writer.add(transactionObserver: fanout, extent: .observerLifetime)
        return fanout
    }

    /// Checks the policies against the schema and starts counting the
    /// commits that change their tables.
    private static func startRetention(_ retention: Retention?, on writer: any DatabaseWriter) throws(DepotError) -> Evictor? {
        guard let retention else { return nil }
        let policies = retention.policies
        do {
            try writer.read { db in
                for policy in policies { _ = try EvictionPlan.resolve(policy, in: db) }
            }
        } catch {
            throw DepotError.storage(error, detail: "invalid retention")
        }
        guard retention.batchSize > 0 else {
            throw DepotError(.storage, detail: "the retention's batch size is \(retention.batchSize): it must be at least 1")
        }
        if let budget = retention.sizeBudget, budget <= 0 {
            throw DepotError(.storage, detail: "the retention's size budget is \(budget) bytes: it must be positive")
        }
        let evictor = Evictor(retention: retention)
        writer.add(transactionObserver: evictor.watch, extent: .databaseLifetime)
        return evictor
    }

    /// Turns on `auto_vacuum = INCREMENTAL`, so that eviction can give pages
    /// back to the file system. SQLite takes it only before the first table
    /// exists: an older file is rewritten by one `VACUUM`, once.
    static func enableIncrementalVacuum(_ writer: any DatabaseWriter) throws {
        try writer.barrierWriteWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 else { return }
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            // A file whose first page is written (WAL mode writes it) keeps
            // its mode until a VACUUM, even without tables.
            if try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") != 2 { try db.execute(sql: "VACUUM") }
        }
    }

    /// Makes a store in memory: for previews, and for tests that need no file.
    ///
    /// - Parameters:
    ///   - migrator: The app's schema.
    ///   - environment: The wall date for `lastSynced` and freshness: the controller's.
    ///   - retention: What eviction keeps (see ``Retention``).
    public static func inMemory(
        migrator: DatabaseMigrator = DatabaseMigrator(),
        retention: Retention? = nil,
        environment: DepotEnvironment = .live
    ) throws(DepotError) -> Store {
        let queue: DatabaseQueue
        do {
            queue = try DatabaseQueue()
            if retention?.sizeBudget != nil { try enableIncrementalVacuum(queue) }
            try prepare(queue, migrator: migrator)
        } catch {
            throw DepotError.storage(error, detail: "cannot open an in-memory store")
        }
        let store = Store(writer: queue, evictor: try startRetention(retention, on: queue), environment: environment)
        store.evictor?.start(store)
        return store
    }

    private init(writer: any DatabaseWriter, evictor: Evictor?, environment: DepotEnvironment) {
        self.writer = writer
        // The connection's own value: a first look at a store no other
        // connection reaches (in memory) finds nothing.
        self.seenDataVersion = Mutex((try? writer.writeWithoutTransaction(Self.dataVersion)) ?? 0)
        self.fanout = Self.startFanout(on: writer)
        self.openingLock = nil
        self.isReadOnly = false
        self.newerMigrations = []
        self.filePath = nil
        self.evictor = evictor
        self.environment = environment
        self.recoveryCenter = RecoveryCenter(opening: nil, last: nil)
    }

    /// Creates Depot's tables and runs the app's migrations where needed.
    ///
    /// - Returns: The migrations the file holds that `migrator` does not
    ///   know (``newerMigrations``).
    @discardableResult
    static func prepare(_ writer: any DatabaseWriter, migrator: DatabaseMigrator) throws -> [String] {
        // Usually everything is in place already: check with a read, so that
        // opening a warm cache (an app's cold start) takes no write transaction.
        let ready: Bool
        let unknown: [String]
        do {
            (ready, unknown) = try writer.read { db in
                (try SyncLedger.isCurrent(db) && OutboxTable.isCurrent(db) && PagingTable.exists(db) && db.tableExists(ValueTable.name)
                    && migrator.hasCompletedMigrations(db),
                 try unknownMigrations(migrator, db))
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            // Reading Depot's and GRDB's own tables fails only if their schema
            // is not one either ever wrote ("no such column"): damage.
            throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: "the store's own tables do not read: \(error.message ?? "")")
        }
        if ready { return unknown }
        // A migration writes into the file: first make sure it is sound. A
        // schema that lost tables to damage would otherwise get empty new
        // ones, and what the old ones held would be orphaned for good.
        try writer.read { db in
            guard try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") != 0 else { return }
            let findings = try String.fetchAll(db, sql: "PRAGMA quick_check(20)")
            guard findings == ["ok"] else {
                throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: findings.prefix(3).joined(separator: "; "))
            }
        }
        do {
            try writer.write { db in
                try SyncLedger.createTable(db)
                try OutboxTable.create(db)
                try PagingTable.create(db)
                try ValueTable.create(db)
            }
            try migrator.migrate(writer)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
            // The same migrations on an empty database tell a damaged file (its
            // tables disagree with the migrations it records) from a bug in a
            // migration, which fails there too.
            let empty = try DatabaseQueue()
            guard (try? migrator.migrate(empty)) != nil else { throw error }
            throw DatabaseError(resultCode: .SQLITE_CORRUPT, message: "the file's tables disagree with its migrations: \(error.message ?? "")")
        }
        // The check above ran on a pool reader, which keeps the schema it read:
        // after a migration that rebuilds a table, its first `SELECT *` would
        // read the old column positions. Readers start afresh instead.
        (writer as? DatabasePool)?.invalidateReadOnlyConnections()
        // Asked again after the migration, which forgets the identifiers a
        // squashed migration merged (they are no newer app's).
        return try writer.read { db in try unknownMigrations(migrator, db) }
    }

    /// The migrations applied to the file that `migrator` does not know
    /// (GRDB's `hasBeenSuperseded`, by name): a newer version of the app
    /// migrated it, and this one cannot tell what its tables mean now. A
    /// migrator without migrations claims no schema (a tool that looks at
    /// any app's cache, say): it knows of none.
    static func unknownMigrations(_ migrator: DatabaseMigrator, _ db: Database) throws -> [String] {
        guard !migrator.migrations.isEmpty, try db.tableExists("grdb_migrations") else { return [] }
        let known = Set(migrator.migrations)
        return try migrator.appliedIdentifiers(db).filter { !known.contains($0) }.sorted()
    }

    /// The path of the database file, or `nil` in memory.
    public var path: String? { filePath }

    /// The path the store was opened at, or `nil` in memory.
    private let filePath: String?

    /// Whether the file was opened read-only, because the process cannot
    /// write it: reads show what it holds, and writes fail with `.storage`.
    public let isReadOnly: Bool

    /// The migrations the file holds that this app's migrator does not know:
    /// a newer version of the app wrote it (empty otherwise). The store reads
    /// and writes it as far as its tables allow; what the newer tables refuse
    /// fails as ``Depot/DepotError/StorageProblem/newerSchema``.
    public let newerMigrations: [String]

    /// The store's rebuilds of a damaged file (see ``recoverIfDamaged()``).
    let recoveryCenter: RecoveryCenter

    /// The sync ledger kept in this database.
    public var ledger: SyncLedger { SyncLedger(store: self) }

    /// Reads from the database.
    ///
    /// For example:
    ///
    /// ```swift
    /// let count = try await store.read { db in try Song.fetchCount(db) }
    /// ```
    public func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws(DepotError) -> T {
        do {
            return try await writer.read(value)
        } catch {
            noticeFailure(error)
            throw failure(error, detail: "read failed")
        }
    }

    /// Writes in one transaction: everything `updates` does lands, or nothing does.
    public func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws(DepotError) -> T {
        do {
            return try await writer.write(updates)
        } catch {
            noticeFailure(error)
            throw failure(error, detail: "write failed")
        }
    }

    /// `error` from a read or write as a `DepotError`: on a file a newer
    /// version of the app migrated, what SQLite refused because of the
    /// newer tables ("no such column", a constraint this version does not
    /// fill) is ``Depot/DepotError/StorageProblem/newerSchema``.
    func failure(_ error: any Error, detail: String) -> DepotError {
        if !newerMigrations.isEmpty, let refused = Self.databaseError(in: error),
           [.SQLITE_ERROR, .SQLITE_CONSTRAINT, .SQLITE_MISMATCH].contains(refused.resultCode) {
            return DepotError(.storage, detail: detail, underlying: StorageFailure.newerSchema(unknownMigrations: newerMigrations, cause: error))
        }
        return DepotError.storage(error, detail: detail)
    }

    /// SQLite's error in `error`, or in the `DepotError`s that wrap it.
    private static func databaseError(in error: any Error, depth: Int = 0) -> DatabaseError? {
        if let database = error as? DatabaseError { return database }
        guard depth < 8, let wrapped = (error as? DepotError)?.underlying else { return nil }
        return databaseError(in: wrapped, depth: depth + 1)
    }

    // MARK: - Other processes

    /// Looks for commits that other processes (an app extension, another
    /// command-line run) made to the file since the last look, and if there
    /// were any, refreshes every live result on the store as a commit of its
    /// own would, and tells eviction to choose its rows again. SQLite tells
    /// no process of another's commits, so an app calls this when it comes
    /// to the foreground, or runs ``watchOtherProcesses(every:)``.
    ///
    /// - Returns: Whether another process had committed.
    /// - Throws: `.storage` if the store cannot be read (closed, say).
    @discardableResult
    public func refreshFromOtherProcesses() async throws(DepotError) -> Bool {
        do {
            return try await writer.writeWithoutTransaction { db in
                // Deferred, not `write`'s IMMEDIATE: reading data_version
                // takes no write lock, so a look never waits for another
                // process's write transaction (nor holds up its writes). GRDB
                // tells observers of an empty deferred transaction's commit
                // too, so the notification still reaches them.
                var changed = false
                try db.inTransaction(.deferred) {
                    changed = try self.noticeOtherConnections(db)
                    return .commit
                }
                return changed
            }
        } catch {
            throw DepotError.storage(error, detail: "cannot look for other processes' commits")
        }
    }

    /// Calls ``refreshFromOtherProcesses()`` every `interval` of the
    /// environment's clock until the calling task is cancelled or the store closes. A look
    /// costs one `PRAGMA` on the writer's connection, in a transaction that
    /// takes no write lock: it waits for this process's writes under way,
    /// not for another process's.
    ///
    /// ```swift
    /// let watch = Task { await store.watchOtherProcesses(every: .seconds(1)) }
    /// // …
    /// watch.cancel()
    /// ```
    public func watchOtherProcesses(every interval: Duration = .seconds(1)) async {
        let clock = environment.clock
        while !isClosing {
            do {
                try await clock.sleep(for: interval)
            } catch {
                return
            }
            do {
                try await refreshFromOtherProcesses()
            } catch {
                if isClosing { return }
            }
        }
    }

    /// Inside a write on the writer's connection: whether another connection
    /// committed since the last look; if so, every observer of the store
    /// hears of a change it could not see, at this transaction's commit.
    func noticeOtherConnections(_ db: Database) throws -> Bool {
        let version = try Self.dataVersion(db)
        let changed = seenDataVersion.withLock { seen in
            defer { seen = version }
            return seen != version
        }
        if changed { try db.notifyChanges(in: .fullDatabase) }
        return changed
    }

    @Sendable private static func dataVersion(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "PRAGMA data_version") ?? 0
    }

    // MARK: - Delivery

    /// Returns once every commit so far has reached, on the main actor, the
    /// ``ResultsController``s and ``SyncStatus``es whose reads it changed.
    ///
    /// Commits reach live results a little after the transaction: when
    /// `perform` returns for a ``CachingOperation``, its rows are in the
    /// store (any read sees them), and they are on screen once this returns.
    /// Tests wait on it instead of polling:
    ///
    /// ```swift
    /// _ = try await controller.perform(FetchContacts())
    /// await store.settled()
    /// #expect(contacts.fetchedObjects.count == 3)
    /// ```
    ///
    /// A command-line tool that prints and exits can call
    /// ``ResultsController/performFetch()`` instead, which reads at once.
    public func settled() async {
        await fanout.settled()
    }

    // MARK: - Closing

    /// Closes the database once the reads and writes under way have ended;
    /// later ones fail with `.storage`. Pools close when released, so call
    /// this only where the file must be released at a known point (tests that
    /// delete it, for example). Closing again does nothing.
    ///
    /// Nothing queued is lost: an ``Outbox`` lane whose next read or write
    /// meets the closed store stops, and what it had not settled stays in the
    /// file for the next launch.
    ///
    /// The wait happens on a thread of the store's own. GRDB's `close()` blocks its
    /// caller until every reader is back, and an async read gives its reader
    /// back on Swift's cooperative pool: blocking those threads instead would
    /// deadlock once closes occupy them all (two, on a two-core machine).
    public func close() async throws(DepotError) {
        closeBegan.store(true, ordering: .releasing)
        let writer = self.writer
        let closed: Result<Void, DepotError> = await withCheckedContinuation { continuation in
            closeQueue.async {
                do {
                    if let pool = writer as? DatabasePool { try pool.close() }
                    if let queue = writer as? DatabaseQueue { try queue.close() }
                    continuation.resume(returning: .success(()))
                } catch {
                    continuation.resume(returning: .failure(DepotError.storage(error, detail: "close failed")))
                }
            }
        }
        if case .failure = closed {
            // Still open: what fails from now on fails for its own reasons.
            closeBegan.store(false, ordering: .releasing)
        }
        try closed.get()
        // Once: a second close finds none left.
        for handler in closeHandlers.withLock({ handlers in defer { handlers.removeAll() }; return handlers }) { handler() }
    }
}

extension DepotError {
    /// Wraps a failure from inside a database access. SQLite's own errors become
    /// `.storage`; what the caller's closure threw (a `DepotError`, a decoding
    /// error, a parser's error) keeps its meaning.
    static func storage(_ error: any Error, detail: String) -> DepotError {
        if error is DatabaseError || error is StorageFailure {
            return DepotError(.storage, detail: detail, underlying: error)
        }
        return DepotError.wrap(error, operation: nil, fallback: .processing)
    }

    /// Wraps a failure to open the file at `path`. SQLite says only "unable
    /// to open" (`SQLITE_CANTOPEN`) whatever the reason, and the store says
    /// only "cannot create" when the file cannot be made: the file system
    /// is asked why, so that ``storageProblem`` can tell a permission problem.
    static func opening(_ error: any Error, path: String) -> DepotError {
        let detail = "cannot open the store at \(path)"
        let cantOpen = (error as? DatabaseError)?.resultCode == .SQLITE_CANTOPEN
        let cantCreate = (error as? DepotError).map { $0.code == .storage && $0.underlying == nil } ?? false
        if cantOpen || cantCreate, let problem = StorageProblem.accessProblem(at: path) {
            let failure = StorageFailure(problem: problem, explanation: "the file system refuses access (\(problem))", cause: error)
            return DepotError(.storage, detail: detail, underlying: failure)
        }
        return storage(error, detail: detail)
    }
}
