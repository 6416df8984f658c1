import Depot
import DepotStore
import Foundation
import GRDB
import Observation

/// The Timeline example's model: the cached timeline with its avatars, the
/// sync status, posting, and what the network is doing.
///
/// It shows the MVC-N talk's priorities at work. Refreshing the timeline is
/// high priority; posts go through the outbox (durable at once, very high
/// priority, sent within the grace at exit or on the next launch); avatars are low priority, in the `images` category, and
/// droppable. On a poor link the controller pauses images; with
/// ``qualityRules`` the queued avatars wait and trickle out one at a time, and
/// under the default rules, which drop them, the app asks again when images resume.
///
/// For example:
///
/// ```swift
/// let app = try TimelineApp(controller: controller, autoRefresh: .seconds(30))
/// try await app.post("Posting from the tunnel.")   // durable now, on screen as pending
/// for await update in app.entries.updates() { render(update.snapshot) }
/// let report = await app.shutdown(grace: .seconds(10))   // the post goes out, avatars are cancelled
/// ```
@MainActor
@Observable
public final class TimelineApp {
    /// A post written in this session, and how it went.
    public struct SentPost: Sendable, Identifiable {
        /// Where a post is.
        public enum State: Sendable {
            /// In the outbox: it goes out as soon as it can, on a later
            /// launch if need be. The timeline shows it as pending.
            case queued
            /// Made on the server: the post as stored.
            case sent(TimelinePost)
            /// Refused by the server; the timeline shows it with the reason.
            case rejected(DepotError)
        }

        /// Whether it is still in the outbox.
        public var isQueued: Bool {
            if case .queued = state { return true }
            return false
        }

        /// Its outbox entry.
        public var id: OutboxEntry.ID
        /// The text.
        public var text: String
        /// Where it is.
        public var state: State
    }

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
    /// Where posts wait until the server has them: in the cache file, so
    /// they survive quitting and crashes.
    public let outbox: Outbox
    /// The timeline, newest first, each post with its avatar's state: the
    /// rows of ``pages``.
    public let entries: ResultsController<TimelineEntry>
    /// The timeline as a paged list: ``refresh()`` loads the newest page,
    /// ``loadOlderPosts()`` the page before the oldest post on screen.
    public let pages: PagedResults<TimelineEntry>
    /// Whether the timeline is syncing, when it last synced, and its last
    /// error. Its automatic refreshes merge the newest posts without
    /// dropping the older pages loaded.
    public let status: SyncStatus
    /// The author of posts made here.
    public let author: String
    /// Posts sent in this session, oldest first.
    public private(set) var sentPosts: [SentPost] = []
    /// Operations queued, running and so on, as of the controller's last event.
    public private(set) var activity: NetworkController.Activity
    /// The timeline's live feed: while watched (``isLive``), posts and
    /// deletions made elsewhere reach the cache as they happen, and its
    /// ``DepotStore/SyncStatus/live`` says `live`, `catching up` or `offline`.
    public let feed: LiveFeed<TimelineFeed>
    /// Whether the app keeps ``feed`` live (and does not poll).
    public var isLive: Bool { liveWatch != nil }
    @ObservationIgnored private var liveWatch: LiveFeed<TimelineFeed>.Watch?

    @ObservationIgnored private var avatarTickets: [String: Ticket] = [:]
    /// Avatars fetched in this session: the list may show a row without its
    /// avatar for a moment after the fetch ended, and must not fetch it again.
    @ObservationIgnored private var fetchedAvatars: Set<String> = []
    @ObservationIgnored private var firstRefreshEnded = false
    @ObservationIgnored private var followers: [Task<Void, Never>] = []

    /// Builds the model, shows the cached timeline, and starts a refresh; when
    /// it ends, the avatars not cached yet are fetched.
    ///
    /// - Parameters:
    ///   - controller: The controller; its configuration must have a `store`
    ///     opened with ``TimelineSchema/migrator``.
    ///   - author: The handle posts are made under.
    ///   - autoRefresh: Refresh this often, and on reconnect; `nil` for manual refresh only.
    ///     Ignored when `live`: the stream brings changes, nothing polls.
    ///   - live: Keep the timeline live through ``feed`` (server-sent events).
    ///   - waitsForNetwork: Whether a refresh and the outbox wait out an
    ///     offline spell (the default), or fail at once and leave posts
    ///     queued, for one-shot runs.
    ///   - pageSize: How many posts the newest page and each older page hold.
    /// - Throws: `.storage` if no store is configured or the first fetch from it fails.
    public init(controller: NetworkController, author: String = "you", autoRefresh: Duration? = nil, live: Bool = false, waitsForNetwork: Bool = true, pageSize: Int = TimelinePages.defaultLimit) throws(DepotError) {
        guard let store = controller.store else {
            throw DepotError(.storage, detail: "TimelineApp needs a store: set NetworkController.Configuration.store")
        }
        self.controller = controller
        self.store = store
        self.author = author
        outbox = Outbox(store: store, controller: controller, types: [CreatePost.self], waitsForNetwork: waitsForNetwork)
        let offlineBehavior: OfflineBehavior = waitsForNetwork ? .waitForConnectivity : .failFast
        // Every cached post, however many pages brought them; the newest page
        // loads at once (a refresh asked for meanwhile joins it).
        pages = try controller.pagedResults(
            for: TimelineEntry.newestFirst(limit: .max),
            pages: TimelinePages(limit: pageSize, offlineBehavior: offlineBehavior),
            policy: .cacheThenNetwork)
        entries = pages.results
        // The same ledger key as the newest page: one "last synced" for both.
        status = try SyncStatus(refreshing: FetchTimeline(limit: pageSize, offlineBehavior: offlineBehavior), with: controller)
        activity = controller.activity
        feed = try LiveFeed(TimelineFeed(), controller: controller)
        if live {
            liveWatch = feed.watch()
        } else if let autoRefresh {
            status.autoRefresh(every: autoRefresh)
        }
        follow()
        // Avatars wait for the first refresh to end (however it ends): the
        // timeline comes first by construction, not only by priority.
        // Posts an earlier run left go out (at very high priority, ahead of the refresh).
        followers.append(Task { [outbox] in try? await outbox.start() })
        followers.append(Task { [weak self] in
            await self?.pages.waitForInitialLoad()
            self?.firstRefreshEnded = true
            self?.requestMissingAvatars()
        })
    }

    isolated deinit {
        followers.forEach { $0.cancel() }
    }

    /// Refreshes the timeline: the newest page again, and the older pages
    /// go once it lands (see ``DepotStore/PagedResults/refresh()``); a
    /// refresh already running is joined. Once it has ended,
    /// ``requestMissingAvatars()`` may ask for avatars.
    public func refresh() async {
        await pages.refresh()
        // The status shares the newest page's ledger key: it says how that went now.
        await status.reload()
        firstRefreshEnded = true
    }

    /// Loads the page of posts older than the oldest on screen, if the
    /// server has more; a failure (offline, say) is in the pages'
    /// ``DepotStore/PagedResults/pageError``.
    public func loadOlderPosts() async {
        await pages.loadNextPage()
    }

    /// Posts `text` through the outbox. Returns once the post is stored (with
    /// its pending row, which the timeline shows at once), before it is sent.
    ///
    /// - Returns: The outbox ticket, to await the server's answer.
    /// - Throws: `.storage` if the cache cannot take it (then nothing was queued).
    @discardableResult
    public func post(_ text: String) async throws(DepotError) -> OutboxTicket {
        let ticket = try await outbox.send(CreatePost(text: text, author: author))
        sentPosts.append(SentPost(id: ticket.id, text: text, state: .queued))
        followers.append(Task { [weak self] in
            let outcome = await ticket.outcome()
            self?.finishPost(ticket.id, outcome)
        })
        return ticket
    }

    /// Sends what the outbox holds, in order, and returns when every post is
    /// decided, or (with `waitsForNetwork: false`) when one could not be sent.
    ///
    /// - Returns: How many posts are still queued.
    @discardableResult
    public func sendPending() async -> Int {
        try? await outbox.start()
        await outbox.waitUntilIdle()
        return await settlePosts()
    }

    /// Removes the rejected posts from the timeline, once the user has seen them.
    public func dismissRejected() async throws(DepotError) {
        try await store.write { db in
            _ = try PendingPost.filter(Column("rejection") != nil).deleteAll(db)
        }
    }

    /// Quits through the controller's single decision point: posts get up
    /// to `grace` to go out (those queued behind another too), avatars and
    /// refreshes are cancelled. What is left stays in the outbox for the
    /// next launch. Returns once every post's state is known.
    public func shutdown(grace: Duration) async -> ShutdownReport {
        let report = await controller.shutdown(grace: grace)
        await outbox.waitUntilIdle()
        await settlePosts()
        followers.forEach { $0.cancel() }
        activity = controller.activity
        return report
    }

    /// Brings the session's posts up to date with the outbox: a post no
    /// longer in it was decided, and its outcome is known without waiting.
    /// - Returns: How many posts are still queued.
    @discardableResult
    private func settlePosts() async -> Int {
        guard let queued = try? await outbox.entries() else { return sentPosts.count { $0.isQueued } }
        let waiting = Set(queued.map(\.id))
        for post in sentPosts where post.isQueued && !waiting.contains(post.id) {
            finishPost(post.id, await outbox.outcome(of: post.id))
        }
        return queued.count
    }

    private func finishPost(_ id: OutboxEntry.ID, _ outcome: Result<NetworkResponse, DepotError>) {
        guard let index = sentPosts.firstIndex(where: { $0.id == id }), sentPosts[index].isQueued else { return }
        switch outcome.flatMap({ response in Result { try response.decode(TimelinePost.self) }.mapError { DepotError.wrap($0, operation: CreatePost.typeName, fallback: .decoding) } }) {
        case .success(let post): sentPosts[index].state = .sent(post)
        case .failure(let error): sentPosts[index].state = .rejected(error)
        }
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
        let missing = Set(entries.fetchedObjects.lazy.filter { !$0.hasAvatar && !$0.isPending }.map(\.avatar))
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
        let events = controller.events()
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
