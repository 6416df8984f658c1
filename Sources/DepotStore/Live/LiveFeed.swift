import Depot
import Foundation
import Seeded
import Synchronization

/// What landed through a ``LiveFeed``, in order: for an app that shows each
/// change as it happens (`tail -f`), beside the ``ResultsController`` that
/// shows the rows.
public enum LiveFeedEvent<Change: Sendable>: Sendable {
    /// These changes were committed to the cache (from the stream, or a
    /// page of the change feed), oldest first.
    case applied([Change])
    /// A full sync replaced the feed's rows with this many.
    case replaced(rows: Int)
    /// An event of the stream could not be processed and was skipped.
    case skipped(DepotError)
}

/// Keeps a ``ChangeFeed`` live: while someone watches it, the cache follows
/// the server as changes happen.
///
/// A watched feed first catches up (a full sync if it has no cursor yet),
/// then opens its server-sent events stream from the kept cursor and applies
/// each batch of events in one transaction. It reconnects with
/// `Last-Event-ID` after a drop, a server close or a relaunch, backing off
/// with jitter; offline, the stream waits in the controller's queue like
/// other work and resumes when the network is back. When the server cannot
/// resume, the feed catches up through the change feed. The stream holds no
/// concurrency slot and never holds up ``/Depot/NetworkController/shutdown(grace:)``.
/// When the last watch ends, the stream closes after ``Configuration/linger``,
/// and reopens when the feed is watched again.
///
/// ``status`` says what it is doing (``SyncStatus/live``): live, catching up
/// with a count, up to date, or offline.
///
/// For example (<doc:LiveData> writes `MessagesFeed`):
///
/// ```swift
/// let feed = try LiveFeed(MessagesFeed(), controller: controller)
/// let messages = try ResultsController(store: store, request: Message.order(Column("id").desc))
/// let watch = feed.watch()
/// print(feed.status.live ?? .upToDate)   // connecting, live, catching up, offline
/// ```
@MainActor
public final class LiveFeed<Feed: ChangeFeed> {
    /// How a feed reconnects and when it closes.
    public struct Configuration: Sendable, Hashable {
        /// How long the stream stays open after its last watch ends. Default: 10 s.
        public var linger: Duration
        /// A stream that sends nothing for this long, not even a heartbeat,
        /// is dropped and reopened. Default: 45 s (three missed 15 s heartbeats).
        public var idleDeadline: Duration
        /// The first wait before reconnecting when the server closed the
        /// stream without a `retry` of its own, or after the controller gave
        /// up on a failure; doubled after each connection that brought
        /// nothing, plus up to half again of jitter. Default: 1 s.
        public var reconnectDelay: Duration
        /// The longest wait before reconnecting. Default: 60 s.
        public var maximumReconnectDelay: Duration
        /// The largest event the stream may send; a larger one drops the
        /// connection (and memory stays bounded). Default: 1 MB.
        public var maximumEventSize: Int

        /// Makes a configuration.
        public init(linger: Duration = .seconds(10), idleDeadline: Duration = .seconds(45), reconnectDelay: Duration = .seconds(1), maximumReconnectDelay: Duration = .seconds(60), maximumEventSize: Int = ServerSentEventParser.defaultMaximumEventSize) {
            self.linger = linger
            self.idleDeadline = idleDeadline
            self.reconnectDelay = reconnectDelay
            self.maximumReconnectDelay = maximumReconnectDelay
            self.maximumEventSize = maximumEventSize
        }
    }

    /// Keeps its feed's stream open until it is cancelled or released.
    public final class Watch: Sendable {
        private let release: Mutex<(@MainActor @Sendable () -> Void)?>

        init(release: @escaping @MainActor @Sendable () -> Void) {
            self.release = Mutex(release)
        }

        /// Ends this watch: with no other, the stream closes after the linger
        /// (counted from now).
        @MainActor
        public func cancel() {
            take()?()
        }

        private func take() -> (@MainActor @Sendable () -> Void)? {
            release.withLock { value in
                defer { value = nil }
                return value
            }
        }

        deinit {
            guard let release = take() else { return }
            Task { @MainActor in release() }
        }
    }

    /// The feed.
    public let feed: Feed
    /// The feed's sync status: its ``SyncStatus/live`` state, last sync and last error.
    public let status: SyncStatus
    /// How it reconnects and lingers.
    public let configuration: Configuration

    private let controller: NetworkController
    private let store: Store
    private let sync: FeedSync<Feed>
    private let clock: any Clock<Duration>
    private var random: SplitMix64
    private var watchers = 0
    private var runTask: Task<Void, Never>?
    /// How many runs began: the current one's number.
    private var runs = 0
    private nonisolated let parking: FeedParking
    private var lingerTask: Task<Void, Never>?
    private var subscribers: [UUID: AsyncStream<LiveFeedEvent<Feed.Change>>.Continuation] = [:]
    /// What the stream and the controller report, in order, to the main
    /// actor: one sequence, so that the status follows the order things
    /// happened in, however late the main actor reads it.
    private let updates: AsyncStream<Update>.Continuation
    private var updatesTask: Task<Void, Never>?

    enum Update: Sendable {
        /// The controller started an attempt of the stream (or a retry).
        case started
        /// The controller holds the stream until the network is back.
        case waitingForNetwork
        case opened
        case applied([Feed.Change])
        case skipped(DepotError)
    }

    /// Makes a live feed run by `controller`, whose store holds the cache.
    ///
    /// - Throws: ``/Depot/DepotError/Code/storage`` when the controller has no store.
    public init(_ feed: Feed, controller: NetworkController, configuration: Configuration = Configuration()) throws(DepotError) {
        let store = try controller.requireStore()
        let parking = FeedParking()
        let sync = FeedSync(feed: feed, controller: controller, store: store, parking: parking)
        self.parking = parking
        self.feed = feed
        self.controller = controller
        self.store = store
        self.sync = sync
        self.configuration = configuration
        self.clock = controller.configuration.environment.clock
        self.random = SplitMix64(seed: controller.configuration.environment.seed ?? UInt64.random(in: .min ... .max))
        self.status = SyncStatus(key: feed.syncKey, store: store, clock: clock, events: { controller.events() }) { _ async throws(DepotError) in
            _ = try await sync.catchUp()
        }
        status.live = .upToDate
        let (stream, continuation) = AsyncStream<Update>.makeStream()
        updates = continuation
        updatesTask = Task { [weak self] in
            for await update in stream {
                guard let self else { return }
                self.handle(update)
                self.parking.handled()
            }
        }
    }

    isolated deinit {
        runTask?.cancel()
        lingerTask?.cancel()
        updatesTask?.cancel()
        updates.finish()
        for continuation in subscribers.values { continuation.finish() }
    }

    /// Keeps the feed live until the watch is cancelled or released: the
    /// first watch catches up and opens the stream.
    public func watch() -> Watch {
        watchers += 1
        lingerTask?.cancel()
        lingerTask = nil
        if runTask == nil {
            // Not parked until the loop waits on something.
            parking.running = true
            runs += 1
            let run = runs
            runTask = Task { [weak self] in
                await self?.run()
                // Ended by itself (the server said stop, the category was
                // cancelled, shutdown), the next watch starts it again; ended
                // by the linger, a newer run may have begun meanwhile.
                guard let self, self.runs == run else { return }
                self.runTask = nil
                self.parking.running = false
            }
        }
        return Watch { [weak self] in self?.unwatch() }
    }

    /// Whether a watch keeps the feed live (or its linger has not run out).
    public var isRunning: Bool { runTask != nil }

    /// Whether the driver waits on something the controller shows (a queued
    /// or running ticket) or on the clock: for tests that drive simulated
    /// time, which must not move while the driver is between two steps.
    nonisolated var isParked: Bool { parking.isParked }
    /// Whether the driver sleeps on the clock (its sleep may not be registered yet).
    nonisolated var isSleeping: Bool { parking.sleeping }

    /// Catches up once through the change feed (a full sync when the feed
    /// has no cursor yet, or the server cannot resume), and returns what it did.
    /// Each page is one transaction; the writer is free between pages.
    @discardableResult
    public func catchUp() async throws(DepotError) -> CatchUpReport {
        status.live = .catchingUp(changes: 0)
        // After it: the stream comes next while watched (or is already open).
        defer { if status.live != .live { status.live = runTask != nil ? .connecting : .upToDate } }
        return try await sync.catchUp(applied: { changes, total in
            self.status.live = .catchingUp(changes: total)
            self.broadcast(.applied(changes))
        }, replaced: { rows in
            self.broadcast(.replaced(rows: rows))
        })
    }

    /// What lands through this feed from now on, in order, until iteration is
    /// cancelled or the feed is released.
    public func events() -> DepotStream<LiveFeedEvent<Feed.Change>> {
        let (stream, continuation) = AsyncStream<LiveFeedEvent<Feed.Change>>.makeStream()
        let id = UUID()
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { @MainActor in self?.subscribers[id] = nil }
        }
        return DepotStream(stream)
    }

    // MARK: - Private

    private func unwatch() {
        watchers -= 1
        guard watchers == 0 else { return }
        let sleep = Self.sleep(on: clock, for: configuration.linger, parking: parking)
        lingerTask = Task { [weak self] in
            do {
                try await sleep()
            } catch {
                return
            }
            guard let self else { return }
            defer { self.parking.woken = false }
            guard self.watchers == 0 else { return }
            self.runTask?.cancel()
            self.runTask = nil
            self.lingerTask = nil
            self.status.live = .upToDate
        }
    }

    private func broadcast(_ event: LiveFeedEvent<Feed.Change>) {
        for continuation in subscribers.values { continuation.yield(event) }
    }

    private func handle(_ update: Update) {
        switch update {
        case .started:
            if status.live == .offline { status.live = .connecting }
        case .waitingForNetwork:
            if runTask != nil { status.live = .offline }
        case .opened:
            if runTask != nil { status.live = .live }
        case .applied(let changes):
            broadcast(.applied(changes))
        case .skipped(let error):
            status.noteSkipped(error)
            broadcast(.skipped(error))
        }
    }

    /// Catch up when needed, then the stream, again and again, until cancelled.
    private func run() async {
        var needsCatchUp = (try? store.ledger.currentCursor(for: feed.syncKey)) == nil
        var quietConnections = 0
        let updates = updates
        let parking = parking
        let report: @Sendable (Update) -> Void = { Self.report($0, to: updates, parking: parking) }
        // The controller's word on the stream's ticket, in one sequence with the stream's own.
        let onEvent: @Sendable (NetworkEvent) -> Void = { event in
            switch event.kind {
            case .waitingForNetwork: report(.waitingForNetwork)
            case .started, .retried: report(.started)
            default: break
            }
        }
        while !Task.isCancelled {
            if needsCatchUp {
                do {
                    try await catchUp()
                    needsCatchUp = false
                } catch {
                    guard !Task.isCancelled, error.code != .cancelled else { return }
                    await store.ledger.recordFailure(error, for: feed.syncKey)
                    quietConnections += 1
                    guard await pause(after: nil, quiet: quietConnections) else { return }
                    continue
                }
            }
            guard let eventsRequest = feed.eventsRequest else {
                status.live = .upToDate
                return
            }
            status.live = .connecting
            let applied = Mutex(0)
            let operation = EventStreamOperation(
                feed: feed, eventsRequest: eventsRequest, idleDeadline: configuration.idleDeadline, maximumEventSize: configuration.maximumEventSize,
                observer: EventStreamObserver(
                    opened: { report(.opened) },
                    applied: { count, _ in applied.withLock { $0 += 1 } },
                    delivered: { changes in
                        if let changes = changes as? [Feed.Change] { report(.applied(changes)) }
                    },
                    skipped: { report(.skipped($0)) }))
            do throws(DepotError) {
                let end = try await controller.performQueuedAtOnce(operation, parking: parking, onEvent: onEvent)
                guard !Task.isCancelled else { return }
                quietConnections = applied.withLock { $0 } > 0 ? 0 : quietConnections + 1
                switch end {
                case .closed(let retry):
                    status.live = .connecting
                    guard await pause(after: retry, quiet: quietConnections) else { return }
                case .startOver:
                    needsCatchUp = true
                case .superseded:
                    continue
                case .stopped:
                    status.live = .upToDate
                    return
                }
            } catch {
                guard !Task.isCancelled, error.code != .cancelled, error.code != .shutDown else {
                    if !Task.isCancelled { status.live = .upToDate }
                    return
                }
                await store.ledger.recordFailure(error, for: feed.syncKey)
                quietConnections = applied.withLock { $0 } > 0 ? 1 : quietConnections + 1
                status.live = .connecting
                guard await pause(after: nil, quiet: quietConnections) else { return }
            }
        }
    }

    /// Waits before reconnecting: the server's `retry` (never less), or the
    /// configured delay, doubled for each connection in a row that brought
    /// nothing, up to the maximum, plus up to half again of jitter, so that
    /// clients a server dropped together do not come back together.
    /// Returns `false` when cancelled.
    private func pause(after retry: Duration?, quiet: Int) async -> Bool {
        let base = retry ?? configuration.reconnectDelay
        let doubled = base * (1 << min(max(quiet - 1, 0), 16))
        let delay = min(doubled, max(configuration.maximumReconnectDelay, base))
        let jitter = Double(random.next() >> 11) / Double(1 << 53) / 2
        let sleep = Self.sleep(on: clock, for: delay * (1 + jitter), parking: parking)
        parking.sleeping = true
        defer {
            parking.sleeping = false
            parking.woken = false
        }
        do {
            try await sleep()
            return true
        } catch {
            return false
        }
    }

    /// A sleep of `duration` from now, now read at once: a sleep that reaches
    /// the clock a moment later still ends when it was meant to. Once it ends,
    /// the driver counts as busy (`woken`) until the main actor acted on it.
    private static func sleep(on clock: any Clock<Duration>, for duration: Duration, parking: FeedParking) -> @Sendable () async throws -> Void {
        func deadline<C: Clock<Duration>>(_ clock: C) -> @Sendable () async throws -> Void {
            let deadline = clock.now.advanced(by: duration)
            return {
                try await clock.sleep(until: deadline, tolerance: nil)
                parking.woken = true
            }
        }
        return deadline(clock)
    }

    /// Hands `update` to the main actor. Until it is handled the feed does
    /// not count as parked: a simulated clock waits for its status.
    private nonisolated static func report(_ update: Update, to updates: AsyncStream<Update>.Continuation, parking: FeedParking) {
        parking.reported()
        if case .terminated = updates.yield(update) { parking.handled() }
    }
}
