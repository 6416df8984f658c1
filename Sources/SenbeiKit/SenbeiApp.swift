import Depot
import DepotStore
import Foundation
import GRDB
import Observation

/// One page of a list as the cache holds it, and where it came from.
public struct EntityPage: Sendable, Hashable {
    /// Where the rows came from.
    public enum Source: String, Sendable, Hashable {
        /// The cache was fresh enough: no request was made.
        case cache
        /// The server was asked just now.
        case network
        /// The server could not be reached: these are the rows fetched last,
        /// as old as ``EntityPage/lastSynced`` says.
        case offline
    }

    /// The page's size and the list's total.
    public var info: PageInfo
    /// The records, in the server's order.
    public var items: [Entity]
    /// Where they came from.
    public var source: Source
    /// When the page was last fetched from the server.
    public var lastSynced: Date?

    /// Makes a page.
    public init(info: PageInfo, items: [Entity], source: Source, lastSynced: Date?) {
        self.info = info
        self.items = items
        self.source = source
        self.lastSynced = lastSynced
    }
}

/// Rows read back from the cache after asking the server for them, and where
/// they came from: tasks, comments and activities.
///
/// When the server cannot be reached (offline, a lost connection, a timeout)
/// and the rows were fetched before, they are the cached ones, with
/// ``source`` `.offline` and ``lastSynced`` saying how old they are.
public struct CachedRows<Row: Sendable & Hashable>: Sendable, Hashable {
    /// The rows, in the order of the cache's request.
    public var rows: [Row]
    /// `.network` when the server answered just now, `.offline` when it could not be asked.
    public var source: EntityPage.Source
    /// When the rows were last fetched from the server.
    public var lastSynced: Date?

    /// Makes a result.
    public init(rows: [Row], source: EntityPage.Source, lastSynced: Date?) {
        self.rows = rows
        self.source = source
        self.lastSynced = lastSynced
    }
}

/// The Senbei CRM client's model: sign-in, the cached lists, tasks, comments
/// and activities, and the changes the user makes. Every network call goes
/// through the controller's operations; every answer is read back from the
/// cache; every event is also posted as a notification (``SenbeiNotification``).
///
/// Changes go through ``outbox``: each is stored and shown in the cache before
/// any byte leaves, and sent when it can be, on this launch or a later one
/// (see ``SenbeiMutation`` and ``createTask(name:due:)``).
///
/// Data work (category ``Depot/OperationCategory/senbei``), changes included,
/// is held until a sign-in succeeds. A refused sign-in (401), or a 401 on any
/// later request, posts `senbeiDidFailLogin` and cancels everything queued in
/// the category (queued changes stay in the outbox for the next sign-in).
///
/// For example:
///
/// ```swift
/// let credentials = SenbeiCredentials(username: "admin", password: "secret")
/// var configuration = NetworkController.Configuration(baseURL: server, transport: AsyncHTTPClientTransport(),
///                                                     adapters: [credentials.adapter(for: server)])
/// configuration.store = try Store(path: cacheFile.path, migrator: SenbeiSchema.migrator)
/// let app = try SenbeiApp(controller: NetworkController(configuration: configuration), credentials: credentials)
/// try await app.start()                                   // send what earlier launches queued
/// let page = try await app.loadPage(.contacts, page: 2)   // from the cache when younger than 5 minutes
/// _ = await app.shutdown(grace: .seconds(5))
/// ```
@MainActor
@Observable
public final class SenbeiApp {
    /// The controller all network work goes through.
    public let controller: NetworkController
    /// The cache the operations write to.
    public let store: Store
    /// The durable queue of the user's changes, in ``store``, with every
    /// type in ``mutationTypes`` registered.
    public let outbox: Outbox
    /// Where Senbei's notifications are posted.
    public let notificationCenter: NotificationCenter
    /// Who is signed in, once a sign-in succeeded; `nil` again after a 401.
    public private(set) var profile: Profile?
    /// The user name the next sign-in sends.
    public var username: String { credentials.username }

    /// How long a fetched page is good for: five minutes.
    public static let listMaxAge: Duration = .seconds(300)
    /// Lists show the cache while it is younger than ``listMaxAge``.
    public static let listPolicy = CachePolicy.cacheFirst(maxAge: listMaxAge)

    @ObservationIgnored let credentials: SenbeiCredentials
    /// The sign-in that runs, and the generation of the credentials it sends.
    @ObservationIgnored private var signingIn: (task: Task<Profile, any Error>, credentials: Int)?
    /// How many sign-ins have succeeded: tells a refusal of an older session's
    /// credentials from a refusal of the current ones.
    @ObservationIgnored private(set) var signIns = 0
    /// Whether a refused sign-in cancelled the changes being sent: the next
    /// sign-in starts the outbox's lanes again.
    @ObservationIgnored var changesStopped = false

    /// Makes the model and its outbox (on the controller's store), and holds
    /// data work until a sign-in. Call ``start()`` to send what earlier
    /// launches queued, and end with ``shutdown(grace:)``.
    ///
    /// - Parameters:
    ///   - controller: The controller; its configuration needs a `store` opened
    ///     with ``SenbeiSchema/migrator`` and the adapter of `credentials`.
    ///   - credentials: The credentials the controller's adapter sends.
    ///   - notificationCenter: Where to post; default: the controller's, else `.default`.
    /// - Throws: `.storage` if no store is configured.
    public init(controller: NetworkController, credentials: SenbeiCredentials, notificationCenter: NotificationCenter? = nil) throws(DepotError) {
        guard let store = controller.store else {
            throw DepotError(.storage, detail: "SenbeiApp needs a store: set NetworkController.Configuration.store")
        }
        self.controller = controller
        self.store = store
        self.outbox = Outbox(store: store, controller: controller, types: Self.mutationTypes)
        self.credentials = credentials
        self.notificationCenter = notificationCenter ?? controller.configuration.notificationCenter ?? .default
        controller.pause(category: .senbei)
    }

    /// A controller configuration for a Senbei server: its base URL, the
    /// credentials' adapter and the store.
    public static func configuration(server: URL, transport: any Transport, credentials: SenbeiCredentials, store: Store, notificationCenter: NotificationCenter? = .default) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: server, transport: transport, adapters: [credentials.adapter(for: server)], notificationCenter: notificationCenter)
        configuration.store = store
        return configuration
    }

    // MARK: - Sign-in

    /// Signs in with the current credentials (a call while a sign-in with the
    /// same credentials runs joins it; one with older credentials is let finish
    /// first), then lets held data work go. Posts `senbeiDidLogin`, or on a 401
    /// `senbeiDidFailLogin` (and cancels queued data work), or `senbeiDidFailWithError`.
    /// A refusal of credentials replaced in the meantime posts nothing.
    @discardableResult
    public func login() async throws(DepotError) -> Profile {
        let generation = credentials.generation
        let task: Task<Profile, any Error>
        if let signingIn, signingIn.credentials == generation {
            task = signingIn.task
        } else {
            controller.pause(category: .senbei)
            let outdated = signingIn?.task
            task = Task {
                _ = try? await outdated?.value
                return try await self.runLogin(credentials: generation)
            }
            signingIn = (task, generation)
        }
        do {
            return try await task.value
        } catch {
            throw DepotError.wrap(error, operation: "Login", fallback: .processing)
        }
    }

    /// Replaces the credentials, then signs in with them.
    @discardableResult
    public func login(username: String, password: String) async throws(DepotError) -> Profile {
        credentials.set(username: username, password: password)
        return try await login()
    }

    private func runLogin(credentials generation: Int) async throws(DepotError) -> Profile {
        defer { if signingIn?.credentials == generation { signingIn = nil } }
        do {
            let profile = try await controller.perform(Login())
            self.profile = profile
            signIns += 1
            controller.resume(category: .senbei)
            post(.senbeiDidLogin, payload: profile)
            await resumeChanges()
            return profile
        } catch {
            let superseded = credentials.generation != generation
            if superseded {
                // The credentials were replaced while this ran: its answer is no news.
            } else if error.code == .unauthorized {
                signInRefused(error)
            } else if error.code != .cancelled {
                post(.senbeiDidFailWithError, error: error, operation: "Login")
            }
            // Unless the sign-in was refused, or a newer one runs and will decide,
            // whoever was signed in still is: the data work held for this sign-in
            // goes on under that session instead of waiting for good.
            let refused = !superseded && error.code == .unauthorized
            let newerSignIn = signingIn.map { $0.credentials != generation } ?? false
            if !refused, !newerSignIn, profile != nil { controller.resume(category: .senbei) }
            throw error
        }
    }

    /// Bad credentials: nobody is signed in, and queued data work is cancelled
    /// (it would be refused too). Data work stays held until the next sign-in.
    func signInRefused(_ error: DepotError) {
        profile = nil
        controller.pause(category: .senbei)
        controller.cancel(category: .senbei)
        changesStopped = true
        post(.senbeiDidFailLogin, error: error)
    }

    // MARK: - Running operations

    /// Signs in if nobody is, then runs `operation`; reports failures.
    ///
    /// A 401 for a request that went out before a newer sign-in succeeded was
    /// meant for the old credentials: the operation is sent once more under the
    /// new session instead of signing it out. (A 401 means the server did
    /// nothing, so a write may be sent again.) A refusal of that second try is
    /// a real one.
    func run<Operation: NetworkOperation>(_ operation: Operation) async throws(DepotError) -> Operation.Output {
        if profile == nil { try await login() }
        let session = signIns
        do {
            return try await controller.perform(operation)
        } catch {
            guard isStaleRefusal(error, since: session) else {
                report(error, operation: operation.name)
                throw error
            }
        }
        do {
            return try await controller.perform(operation)
        } catch {
            report(error, operation: operation.name)
            throw error
        }
    }

    /// Whether `error` is a 401 for credentials of a session older than the one
    /// signed in now (`session` is ``signIns`` when the request was made).
    func isStaleRefusal(_ error: DepotError, since session: Int) -> Bool {
        error.code == .unauthorized && signIns != session && profile != nil
    }

    /// Posts what a failure means: a refused sign-in for a 401, an error otherwise, nothing for a cancellation.
    func report(_ error: DepotError, operation: String) {
        if error.code == .unauthorized {
            signInRefused(error)
        } else if error.code != .cancelled {
            post(.senbeiDidFailWithError, error: error, operation: operation)
        }
    }

    func post(_ name: Notification.Name, payload: Any? = nil, entity: Any? = nil, error: DepotError? = nil, operation: String? = nil) {
        var info: [AnyHashable: Any] = [:]
        if let payload { info[SenbeiNotification.UserInfoKey.payload] = payload }
        if let entity { info[SenbeiNotification.UserInfoKey.entity] = entity }
        if let error { info[SenbeiNotification.UserInfoKey.error] = error }
        if let operation { info[SenbeiNotification.UserInfoKey.operation] = operation }
        notificationCenter.post(name: name, object: self, userInfo: info)
    }

    // MARK: - Lists

    /// Page `page` of `kind`: from the cache when it was fetched less than
    /// ``listMaxAge`` ago (by the controller's `currentDate`), otherwise from the
    /// server (posting `senbeiDidRetrieve<Kind>`). Either way read from the cache.
    ///
    /// - Parameter refresh: Ask the server even when the cache is fresh.
    public func loadPage(_ kind: EntityKind, page: Int = 1, refresh: Bool = false) async throws(DepotError) -> EntityPage {
        let operation = FetchList(kind, page: page)
        var lastSynced = try await store.ledger.entry(for: operation.cacheKey)?.lastSynced
        let fresh = !refresh && lastSynced.map { isFresh($0) } == true
        var source: EntityPage.Source = fresh ? .cache : .network
        if !fresh {
            (source, lastSynced) = try await fetch(operation, lastSynced: lastSynced)
        }
        let (stored, items, created) = try await store.read { db in
            (try PageInfo.fetchOne(db, key: ["kind": kind.rawValue, "page": operation.page]), try Entity.onPage(kind, operation.page).fetchAll(db),
             try Entity.filter(Column("kind") == kind.rawValue && Column("pending") == PendingChange.create).fetchCount(db))
        }
        // Records created here and not yet sent are part of the list, as the server will have them.
        var info = stored ?? PageInfo(kind: kind, page: operation.page, perPage: operation.perPage, total: items.count - created)
        info.total += created
        let result = EntityPage(info: info, items: items, source: source, lastSynced: lastSynced)
        if source == .network { post(SenbeiNotification.didRetrieve(kind), payload: result, entity: kind) }
        return result
    }

    /// Failures that mean "no server to ask right now", as opposed to a server's answer.
    static func isUnreachable(_ error: DepotError) -> Bool {
        [.offline, .connectionLost, .timedOut].contains(error.code)
    }

    private func isFresh(_ lastSynced: Date) -> Bool {
        let age = controller.configuration.currentDate().timeIntervalSince(lastSynced)
        let (seconds, attoseconds) = Self.listMaxAge.components
        // A clock set back makes the age negative: trust the cache then, as CachePolicy does.
        return age <= Double(seconds) + Double(attoseconds) / 1e18
    }

    // MARK: - Tasks, comments, activities

    /// Fetches the open tasks, then returns them from the cache. Posts
    /// `senbeiDidRetrieveTasks` when the server answered. With no server to ask,
    /// returns the tasks fetched last (``CachedRows/source`` `.offline`).
    public func loadTasks() async throws(DepotError) -> CachedRows<CRMTask> {
        let tasks = try await loadCached(FetchTasks()) { db in try CRMTask.open.fetchAll(db) }
        if tasks.source == .network { post(.senbeiDidRetrieveTasks, payload: tasks.rows) }
        return tasks
    }

    /// Runs `operation`, then reads `rows` from the cache; falls back to the
    /// cached rows when the server cannot be reached and they were fetched before.
    private func loadCached<Operation: CachingOperation, Row: Sendable & Hashable>(
        _ operation: Operation,
        rows: @escaping @Sendable (Database) throws -> [Row]
    ) async throws(DepotError) -> CachedRows<Row> {
        let cached = try await store.ledger.entry(for: operation.cacheKey)?.lastSynced
        let (source, lastSynced) = try await fetch(operation, lastSynced: cached)
        return CachedRows(rows: try await store.read(rows), source: source, lastSynced: lastSynced)
    }

    /// Runs `operation` and says where the rows are from now. Offline-first:
    /// when the server cannot be reached and the rows were fetched before
    /// (`lastSynced`), they are shown as `.offline` instead of failing.
    private func fetch<Operation: CachingOperation>(_ operation: Operation, lastSynced: Date?) async throws(DepotError) -> (EntityPage.Source, Date?) {
        do {
            _ = try await run(operation)
            return (.network, try await store.ledger.entry(for: operation.cacheKey)?.lastSynced)
        } catch where Self.isUnreachable(error) && lastSynced != nil {
            return (.offline, lastSynced)
        }
    }

    /// Fetches the comments on `subject`, then returns them from the cache.
    /// Posts `senbeiDidRetrieveComments` when the server answered. With no
    /// server to ask, returns the comments fetched last (`.offline`).
    public func loadComments(on subject: Commentable) async throws(DepotError) -> CachedRows<CRMComment> {
        let comments = try await loadCached(FetchComments(on: subject)) { db in try CRMComment.on(subject).fetchAll(db) }
        if comments.source == .network { post(.senbeiDidRetrieveComments, payload: comments.rows, entity: subject) }
        return comments
    }

    /// Fetches the activity stream, then returns it from the cache, newest first.
    /// Posts `senbeiDidRetrieveActivities` when the server answered. With no
    /// server to ask, returns the stream fetched last (`.offline`).
    public func loadActivities() async throws(DepotError) -> CachedRows<CRMActivity> {
        let activities = try await loadCached(FetchActivities()) { db in try CRMActivity.newestFirst.fetchAll(db) }
        if activities.source == .network { post(.senbeiDidRetrieveActivities, payload: activities.rows) }
        return activities
    }
}
