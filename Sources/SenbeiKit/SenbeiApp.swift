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
    /// For contacts, which have edits waiting in the outbox or a conflict
    /// kept for the user (``DepotStore/RecordState``), by identifier; the
    /// others have neither.
    public var states: [Int: RecordState]

    /// Makes a page.
    public init(info: PageInfo, items: [Entity], source: Source, lastSynced: Date?, states: [Int: RecordState] = [:]) {
        self.info = info
        self.items = items
        self.source = source
        self.lastSynced = lastSynced
        self.states = states
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
/// Signing in is OAuth 2: the user name and password go once to the server's
/// token endpoint (``tokenEndpoint(for:)``), and the token it answers goes to
/// the controller's ``Depot/TokenAuthenticator``, which adds it to every
/// request and renews it, once for everyone, before it expires or when it is
/// refused. The token lives in memory only, never in the cache.
///
/// Data work (category ``Depot/OperationCategory/senbei``), changes included,
/// is held while nobody is signed in. A refused sign-in, or the end of the
/// session (the server refused to renew the token), posts `senbeiDidFailLogin`
/// and cancels everything queued in the category (queued changes stay in the
/// outbox for the next sign-in); the next call that needs the server signs in
/// again with ``credentials``.
///
/// For example:
///
/// ```swift
/// let credentials = SenbeiCredentials(username: "admin", password: "secret")
/// let store = try Store(path: cacheFile.path, migrator: SenbeiSchema.migrator)
/// let configuration = SenbeiApp.configuration(server: server, transport: AsyncHTTPClientTransport(), store: store)
/// let app = try SenbeiApp(controller: NetworkController(configuration: configuration), credentials: credentials)
/// try await app.start()                                   // send what earlier launches queued
/// let page = try await app.loadPage(.contacts, page: 2)   // signs in first; from the cache when younger than 5 minutes
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
    /// The controller's authenticator: it holds the session's token.
    public let authenticator: TokenAuthenticator
    /// Where the password grant goes.
    public let tokenEndpoint: OAuth2TokenEndpoint
    /// The CRM's change feed, kept live while someone watches it: others'
    /// contacts and tasks reach the cache as they are made (see ``CRMFeed``).
    /// Its requests are data work, held until a sign-in.
    ///
    /// For example, while a screen shows contacts:
    ///
    /// ```swift
    /// let watch = app.live.watch()       // live until cancelled or released
    /// for await case .applied(let changes) in app.live.events() { print(changes) }
    /// watch.cancel()
    /// ```
    public let live: LiveFeed<CRMFeed>
    /// Who is signed in, once a sign-in succeeded; `nil` again after a refused
    /// sign-in or the end of the session.
    public private(set) var profile: Profile?
    /// The user name the next sign-in sends.
    public var username: String { credentials.username }

    /// How long a fetched page is good for: five minutes.
    public static let listMaxAge: Duration = .seconds(300)
    /// Lists show the cache while it is younger than ``listMaxAge``.
    public static let listPolicy = CachePolicy.cacheFirst(maxAge: listMaxAge)
    /// The `client_id` Senbei sends to the token endpoint.
    public nonisolated static let clientID = "senbei"
    /// The name errors and notifications give the sign-in.
    nonisolated static let loginName = "Login"

    @ObservationIgnored let credentials: SenbeiCredentials
    /// The sign-in that runs, and the generation of the credentials it sends.
    @ObservationIgnored private var signingIn: (task: Task<Profile, any Error>, credentials: Int)?
    /// Whether a refused sign-in cancelled the changes being sent: the next
    /// sign-in starts the outbox's lanes again.
    @ObservationIgnored var changesStopped = false
    /// Why the last session ended, until the next sign-in: the requests its
    /// sign-out cancelled failed because of it, and say so.
    @ObservationIgnored private var sessionEnd: DepotError?

    /// Makes the model and its outbox (on the controller's store), and holds
    /// data work until a sign-in. Call ``start()`` to send what earlier
    /// launches queued, and end with ``shutdown(grace:)``.
    ///
    /// - Parameters:
    ///   - controller: The controller, made from ``configuration(server:transport:store:notificationCenter:)``
    ///     or one like it: a base URL, a `store` opened with ``SenbeiSchema/migrator``
    ///     and a ``Depot/TokenAuthenticator`` for the server.
    ///   - credentials: The user name and password sign-ins send.
    ///   - notificationCenter: Where to post; default: the controller's, else `.default`.
    /// - Throws: `.storage` if no store is configured, `.invalidRequest` if
    ///   there is no base URL or no authenticator.
    public init(controller: NetworkController, credentials: SenbeiCredentials, notificationCenter: NotificationCenter? = nil) throws(DepotError) {
        guard let store = controller.store else {
            throw DepotError(.storage, detail: "SenbeiApp needs a store: set NetworkController.Configuration.store")
        }
        guard let server = controller.configuration.baseURL, let authenticator = controller.configuration.authenticator else {
            throw DepotError(.invalidRequest, detail: "SenbeiApp needs the server's base URL and a TokenAuthenticator: use SenbeiApp.configuration(server:transport:store:)")
        }
        self.controller = controller
        self.store = store
        self.outbox = Outbox(store: store, controller: controller, types: Self.mutationTypes)
        self.credentials = credentials
        self.authenticator = authenticator
        self.tokenEndpoint = Self.tokenEndpoint(for: server)
        self.live = try LiveFeed(CRMFeed(), controller: controller)
        self.notificationCenter = notificationCenter ?? controller.configuration.observability.notificationCenter ?? .default
        controller.pause(category: .senbei)
        watchSignOuts()
    }

    /// A controller configuration for a Senbei server: its base URL, a token
    /// authenticator for it (OAuth 2 at ``tokenEndpoint(for:)``, the token kept
    /// in memory only) and the store.
    public static func configuration(server: URL, transport: any Transport, store: Store, notificationCenter: NotificationCenter? = .default) -> NetworkController.Configuration {
        var configuration = NetworkController.Configuration(baseURL: server, transport: transport, observability: .init(notificationCenter: notificationCenter))
        configuration.authenticator = TokenAuthenticator(for: server, refresher: .oauth2(tokenEndpoint(for: server)), storage: InMemoryCredentialStorage())
        configuration.store = store
        return configuration
    }

    /// The server's OAuth 2 token endpoint: `<server>/oauth/token`, client ``clientID``.
    public nonisolated static func tokenEndpoint(for server: URL) -> OAuth2TokenEndpoint {
        OAuth2TokenEndpoint(url: server.appending(path: "oauth/token"), clientID: clientID)
    }

    // MARK: - Sign-in

    /// Signs in with the current credentials (a call while a sign-in with the
    /// same credentials runs joins it; one with older credentials is let finish
    /// first): the password grant, the token to the authenticator, then
    /// `GET /profile`; then lets held data work go. Posts `senbeiDidLogin`, or
    /// `senbeiDidFailLogin` when the server refuses the user name or password
    /// (and cancels queued data work), or `senbeiDidFailWithError`. A refusal
    /// of credentials replaced in the meantime posts nothing.
    ///
    /// - Throws: `.unauthorized` (operation `Login`) for a refused user name or
    ///   password (see ``isRefusedSignIn(_:)``), or why the server could not be asked.
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
            throw DepotError.wrap(error, operation: Self.loginName, fallback: .processing)
        }
    }

    /// Replaces the credentials, then signs in with them.
    @discardableResult
    public func login(username: String, password: String) async throws(DepotError) -> Profile {
        credentials.set(username: username, password: password)
        return try await login()
    }

    /// Whether `error` is the server refusing the user name or password (as
    /// opposed to a session that ended: sign in again with the same ones).
    public nonisolated static func isRefusedSignIn(_ error: DepotError) -> Bool {
        error.code == .unauthorized && error.operation == loginName
    }

    /// One sign-in for credentials of `generation` (it sends the newest ones,
    /// as a request would; a refusal is news only while they are current).
    private func runLogin(credentials generation: Int) async throws(DepotError) -> Profile {
        let (username, password) = credentials.snapshot
        defer { if signingIn?.credentials == generation { signingIn = nil } }
        do {
            let credential = try await passwordGrant(username: username, password: password)
            await authenticator.signIn(credential)
            let profile = try await controller.perform(FetchProfile())
            self.profile = profile
            sessionEnd = nil
            controller.resume(category: .senbei)
            post(.senbeiDidLogin, payload: profile)
            await resumeChanges()
            return profile
        } catch {
            let superseded = credentials.generation != generation
            if superseded {
                // The credentials were replaced while this ran: its answer is no news.
            } else if Self.isRefusedSignIn(error) {
                await signInRefused(error)
            } else if error.code != .cancelled {
                post(.senbeiDidFailWithError, error: error, operation: Self.loginName)
            }
            // Unless the sign-in was refused, or a newer one runs and will decide,
            // whoever was signed in still is: the data work held for this sign-in
            // goes on under that session instead of waiting for good.
            let refused = !superseded && Self.isRefusedSignIn(error)
            let newerSignIn = signingIn.map { $0.credentials != generation } ?? false
            if !refused, !newerSignIn, profile != nil { controller.resume(category: .senbei) }
            throw error
        }
    }

    /// The token for `username` and `password`, from the token endpoint.
    /// - Throws: A refused sign-in (see ``isRefusedSignIn(_:)``) for RFC 6749's
    ///   `invalid_grant` (400) or `invalid_client` (401), else why it failed.
    private func passwordGrant(username: String, password: String) async throws(DepotError) -> TokenCredential {
        do {
            return try await controller.perform(tokenEndpoint.passwordGrant(username: username, password: password))
        } catch {
            guard error.status == 400 || error.status == 401 else { throw error }
            throw DepotError(.unauthorized, operation: Self.loginName, status: error.status, detail: "the server refused the user name or password", underlying: error)
        }
    }

    /// Bad credentials: nobody is signed in (a session from earlier credentials
    /// ends too), and queued data work is cancelled. Data work stays held until
    /// the next sign-in.
    func signInRefused(_ error: DepotError) async {
        profile = nil
        if await authenticator.currentCredential() != nil { await authenticator.signOut() }
        hold(error)
    }

    /// The session ended under a signed-in user (the server refused to renew
    /// the token, or refused it): said once, with the same consequences as a
    /// refused sign-in. The next call that needs the server signs in again.
    func sessionEnded(_ error: DepotError) {
        guard profile != nil else { return }
        profile = nil
        sessionEnd = error
        hold(error)
    }

    /// Holds and cancels data work, and says the sign-in failed.
    private func hold(_ error: DepotError) {
        controller.pause(category: .senbei)
        controller.cancel(category: .senbei)
        changesStopped = true
        post(.senbeiDidFailLogin, error: error)
    }

    /// Ends the session when the authenticator signs out by itself (a refused
    /// refresh). A sign-out that a newer sign-in already replaced is no news.
    /// The watch ends with the controller's events, at its shutdown.
    private func watchSignOuts() {
        let events = controller.events()
        Task { [weak self] in
            for await event in events where event.kind == .signedOut {
                guard let self else { return }
                guard authenticator.isSignedOut else { continue }
                sessionEnded(DepotError(.unauthorized, detail: "signed out: \(event.reason ?? "the session ended")"))
            }
        }
    }

    // MARK: - Running operations

    /// Signs in if nobody is, then runs `operation`; reports failures.
    ///
    /// An expired or refused token is the authenticator's business: it renews
    /// it and sends the request again (once), so a failure here is final.
    func run<Operation: NetworkOperation>(_ operation: Operation) async throws(DepotError) -> Operation.Output {
        if profile == nil { try await login() }
        do {
            return try await controller.perform(operation)
        } catch {
            // The sign-out cancels queued data work, and it may reach a request
            // before that request's own 401 does: either way the session ended.
            if error.code == .cancelled, let sessionEnd, profile == nil { throw sessionEnd }
            report(error, operation: operation.name)
            throw error
        }
    }

    /// Posts what a failure means: the end of the session for a 401 (the
    /// authenticator could not get a token the server takes), an error
    /// otherwise, nothing for a cancellation.
    func report(_ error: DepotError, operation: String) {
        if error.code == .unauthorized {
            sessionEnded(error)
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
    /// ``listMaxAge`` ago (by the controller's environment's `date`) and no accepted
    /// change invalidated it since, otherwise from the
    /// server (posting `senbeiDidRetrieve<Kind>`). Either way read from the cache.
    ///
    /// - Parameter refresh: Ask the server even when the cache is fresh.
    public func loadPage(_ kind: EntityKind, page: Int = 1, refresh: Bool = false) async throws(DepotError) -> EntityPage {
        let operation = FetchList(kind, page: page)
        let entry = try await store.ledger.entry(for: operation.cacheKey)
        var lastSynced = entry?.lastSynced
        // An accepted change that invalidated the list (a new contact) makes every page stale.
        let fresh = !refresh && entry?.isStale != true && lastSynced.map { isFresh($0) } == true
        var source: EntityPage.Source = fresh ? .cache : .network
        if !fresh {
            (source, lastSynced) = try await fetch(operation, lastSynced: lastSynced)
        }
        let (stored, items, created, states) = try await store.read { db in
            let items = try Entity.onPage(kind, operation.page).fetchAll(db)
            return (try PageInfo.fetchOne(db, key: ["kind": kind.rawValue, "page": operation.page]), items,
                    try Entity.filter(Column("kind") == kind.rawValue && Column("pending") == PendingChange.create).fetchCount(db),
                    try Self.states(of: items, db))
        }
        // Records created here and not yet sent are part of the list, as the server will have them.
        var info = stored ?? PageInfo(kind: kind, page: operation.page, perPage: operation.perPage, total: items.count - created)
        info.total += created
        let result = EntityPage(info: info, items: items, source: source, lastSynced: lastSynced, states: states)
        if source == .network { post(SenbeiNotification.didRetrieve(kind), payload: result, entity: kind) }
        return result
    }

    /// The contacts among `records` that have edits waiting or a conflict, by identifier.
    public func states(of records: [Entity]) async throws(DepotError) -> [Int: RecordState] {
        try await store.read { db in try Self.states(of: records, db) }
    }

    nonisolated static func states(of records: [Entity], _ db: Database) throws -> [Int: RecordState] {
        var states: [Int: RecordState] = [:]
        for record in records where record.kind == .contacts {
            let state = try RecordState.of(Entity.contactKey(record.id), in: db)
            if state.hasPendingWrites || state.hasConflict { states[record.id] = state }
        }
        return states
    }

    /// Failures that mean "no server to ask right now", as opposed to a server's answer.
    static func isUnreachable(_ error: DepotError) -> Bool {
        [.offline, .connectionLost, .timedOut].contains(error.code)
    }

    private func isFresh(_ lastSynced: Date) -> Bool {
        let age = controller.configuration.environment.date().timeIntervalSince(lastSynced)
        let (seconds, attoseconds) = Self.listMaxAge.components
        // A clock set back since makes the age negative, which says nothing:
        // refetch then, as CachePolicy does.
        return age >= 0 && age <= Double(seconds) + Double(attoseconds) / 1e18
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
