import Depot
import DepotStore
import Foundation
import Observation

/// The Timeline example's model: the cached timeline with its avatars, the
/// sync status, posting, and what the network is doing.
///
/// It shows the MVC-N talk's priorities at work. Refreshing the timeline is
/// high priority; posting is very high and must finish (exit policy
/// `.finish`); avatars are low priority, in the `images` category, and
/// droppable. On a poor link the controller pauses images; with
/// ``qualityRules`` the queued avatars wait and trickle out one at a time, and
/// under the default rules, which drop them, the app asks again when images resume.
///
/// For example:
///
/// ```swift
/// let app = try TimelineApp(controller: controller, autoRefresh: .seconds(30))
/// app.post("Posting from the tunnel.")
/// for await update in app.entries.updates() { render(update.snapshot) }
/// let report = await app.shutdown(grace: .seconds(10))   // the post finishes, avatars are cancelled
/// ```
@MainActor
@Observable
public final class TimelineApp {
    /// What the user is writing: its text, and the idempotency key that makes
    /// sending it again safe. Make one per post the user writes, and send that
    /// same value however often the button is pressed.
    public struct Draft: Sendable, Hashable, Identifiable {
        /// The text.
        public var text: String
        /// The key the server remembers the post by.
        public let idempotencyKey: String
        /// The key, which identifies the draft.
        public var id: String { idempotencyKey }

        /// Makes a draft with a new key (or a given one, to resend).
        public init(text: String, idempotencyKey: String = UUID().uuidString) {
            self.text = text
            self.idempotencyKey = idempotencyKey
        }
    }

    /// A post the user sent in this session, and how it went.
    public struct SentPost: Sendable, Identifiable {
        /// Where a sent post is.
        public enum State: Sendable {
            /// Going out.
            case sending
            /// Made on the server: the post as stored.
            case sent(TimelinePost)
            /// Not made, or not known to be made: the reason (`.cancelled` when
            /// quitting ran out of grace). ``TimelineApp/retry(_:)`` is safe.
            case failed(DepotError)
        }

        /// Whether it is still going out.
        public var isSending: Bool {
            if case .sending = state { return true }
            return false
        }

        /// The operation's ticket.
        public var id: Ticket.ID
        /// The text.
        public var text: String
        /// The draft's idempotency key.
        public var idempotencyKey: String
        /// Where it is.
        public var state: State
    }

    /// How a timeline client should measure its link: samples from 8 KB bodies,
    /// two samples in a row to change class.
    ///
    /// The default (16 KB bodies, link samples of 64 KB, three in a row) suits
    /// feeds and downloads. A timeline mostly moves 20 KB avatars three at a
    /// time: on EDGE that is one 60 KB sample every 4 s, and images would be
    /// paused only after about 19 s. With this, it takes about 9 s.
    nonisolated public static let monitorConfiguration = ConnectionMonitor.Configuration(minimumMeasurableBytes: 8 * 1024, samplesToChange: 2)

    /// What a timeline client should hold back on a poor link: pause images,
    /// drop nothing.
    ///
    /// Avatars are droppable, so the default rules would cancel the queued ones.
    /// A timeline keeps them instead: paused work trickles out one at a time
    /// while nothing else waits, and those transfers keep measuring the link,
    /// so the app notices when it recovers (with every avatar dropped, nothing
    /// would measure it).
    nonisolated public static let qualityRules = QualityRules(threshold: .poor, pausedCategories: [.images], dropPriorityAtMost: nil)

    /// The controller all network work goes through.
    public let controller: NetworkController
    /// The cache.
    public let store: Store
    /// The timeline, newest first, each post with its avatar's state.
    public let entries: ResultsController<TimelineEntry>
    /// Whether the timeline is syncing, when it last synced, and its last error.
    public let status: SyncStatus
    /// The author of posts made here.
    public let author: String
    /// Posts sent in this session, oldest first.
    public private(set) var sentPosts: [SentPost] = []
    /// Operations queued, running and so on, as of the controller's last event.
    public private(set) var activity: NetworkController.Activity

    @ObservationIgnored private var avatarTickets: [String: Ticket] = [:]
    /// Avatars fetched in this session: the list may show a row without its
    /// avatar for a moment after the fetch ended, and must not fetch it again.
    @ObservationIgnored private var fetchedAvatars: Set<String> = []
    @ObservationIgnored private var firstRefreshEnded = false
    @ObservationIgnored private var postWaiters: [CheckedContinuation<Void, Never>] = []
    @ObservationIgnored private var followers: [Task<Void, Never>] = []

    /// Builds the model, shows the cached timeline, and starts a refresh; when
    /// it ends, the avatars not cached yet are fetched.
    ///
    /// - Parameters:
    ///   - controller: The controller; its configuration must have a `store`
    ///     opened with ``TimelineSchema/migrator``.
    ///   - author: The handle posts are made under.
    ///   - autoRefresh: Refresh this often, and on reconnect; `nil` for manual refresh only.
    ///   - waitsForNetwork: Whether a refresh waits out an offline spell (the
    ///     default) or fails at once, for one-shot runs.
    /// - Throws: `.storage` if no store is configured or the first fetch from it fails.
    public init(controller: NetworkController, author: String = "you", autoRefresh: Duration? = nil, waitsForNetwork: Bool = true) throws(DepotError) {
        guard let store = controller.store else {
            throw DepotError(.storage, detail: "TimelineApp needs a store: set NetworkController.Configuration.store")
        }
        self.controller = controller
        self.store = store
        self.author = author
        entries = try controller.results(for: TimelineEntry.newestFirst(), refreshing: FetchTimeline(offlineBehavior: waitsForNetwork ? .waitForConnectivity : .failFast), policy: .cacheThenNetwork)
        guard let status = entries.syncStatus else {
            throw DepotError(.storage, detail: "results came without a sync status")
        }
        self.status = status
        activity = controller.activity
        if let autoRefresh { status.autoRefresh(every: autoRefresh) }
        follow()
        // Avatars wait for the first refresh to end (however it ends): the
        // timeline comes first by construction, not only by priority.
        followers.append(Task { [weak self] in
            await self?.status.refresh()
            self?.firstRefreshEnded = true
            self?.requestMissingAvatars()
        })
    }

    isolated deinit {
        followers.forEach { $0.cancel() }
    }

    /// Refreshes the timeline; a refresh already running is joined.
    public func refresh() async {
        await status.refresh()
    }

    /// Posts a draft. Sending the same draft again (a double press, a retry)
    /// never posts twice: while the first request is out the second joins it,
    /// and afterwards the server answers the draft's idempotency key with the
    /// post it already made.
    ///
    /// - Returns: The post's ticket.
    @discardableResult
    public func post(_ draft: Draft) -> Ticket {
        let key = draft.idempotencyKey
        let operation = CreatePost(text: draft.text, author: author, idempotencyKey: key)
        let ticket = controller.enqueue(operation) { [weak self] result in
            self?.finishPost(key: key, result: result)
        }
        sentPosts.append(SentPost(id: ticket.id, text: draft.text, idempotencyKey: key, state: .sending))
        return ticket
    }

    /// Posts `text` as a new draft.
    @discardableResult
    public func post(_ text: String) -> Ticket {
        post(Draft(text: text))
    }

    /// Sends a post of this session again, with its key: for one that failed
    /// (offline, say). If the server made it after all, it answers with that post.
    @discardableResult
    public func retry(_ sent: SentPost) -> Ticket {
        post(Draft(text: sent.text, idempotencyKey: sent.idempotencyKey))
    }

    /// Waits until no post of this session is still sending.
    public func waitForPosts() async {
        while sentPosts.contains(where: \.isSending) {
            await withCheckedContinuation { postWaiters.append($0) }
        }
    }

    /// Quits through the controller's single decision point: the posts going
    /// out get up to `grace` to finish, avatars and refreshes are cancelled.
    /// Waits for every post's outcome before returning.
    public func shutdown(grace: Duration) async -> ShutdownReport {
        let report = await controller.shutdown(grace: grace)
        await waitForPosts()
        followers.forEach { $0.cancel() }
        activity = controller.activity
        return report
    }

    private func finishPost(key: String, result: Result<TimelinePost, DepotError>) {
        for index in sentPosts.indices where sentPosts[index].idempotencyKey == key && sentPosts[index].isSending {
            switch result {
            case .success(let post): sentPosts[index].state = .sent(post)
            case .failure(let error): sentPosts[index].state = .failed(error)
            }
        }
        let waiters = postWaiters
        postWaiters = []
        waiters.forEach { $0.resume() }
    }

    /// Fetches the avatars of the listed posts that are neither cached nor
    /// already asked for, once the first refresh of the timeline has ended.
    /// While images are paused they wait in the queue (and trickle out one at a
    /// time); under rules that drop them instead, they are asked for again
    /// when images resume.
    ///
    /// The app calls this itself whenever the list changes and when images
    /// resume; call it after ``ResultsController/performFetch()`` when you need
    /// the avatars of rows fetched just now.
    public func requestMissingAvatars() {
        guard firstRefreshEnded, !controller.isShutDown else { return }
        let missing = Set(entries.fetchedObjects.lazy.filter { !$0.hasAvatar }.map(\.avatar))
        for path in missing.sorted() where avatarTickets[path] == nil && !fetchedAvatars.contains(path) {
            avatarTickets[path] = controller.enqueue(FetchAvatar(path: path)) { [weak self] result in
                // Dropped, cancelled or failed: asked for again the next time it is missing.
                self?.avatarTickets[path] = nil
                if case .success = result { self?.fetchedAvatars.insert(path) }
            }
        }
    }

    private func follow() {
        let updates = entries.updates()
        followers.append(Task { [weak self] in
            for await _ in updates {
                self?.requestMissingAvatars()
            }
        })
        let events = controller.events
        followers.append(Task { [weak self] in
            for await event in events {
                guard let self else { return }
                if event.kind == .progress { continue }
                if event.kind == .categoryResumed, event.category == .images {
                    self.requestMissingAvatars()
                }
                self.activity = self.controller.activity
            }
        })
    }
}
