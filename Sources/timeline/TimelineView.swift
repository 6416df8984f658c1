import Depot
import DepotStore
import ExampleSupport
import Foundation
import Observation
import SyncStatusText
import TextLayout
import TimelineKit

/// The interactive terminal view. It reads only the app's results and
/// statuses, and redraws when they or the controller report a change.
@MainActor
final class TimelineView {
    enum Event {
        case key(Terminal.Key)
        case changed
        case ended
    }

    private let app: TimelineApp
    private let link: LinkProfile
    private var top = 0
    /// The post being written, while composing.
    private var draft: String?

    init(app: TimelineApp, link: LinkProfile) {
        self.app = app
        self.link = link
    }

    /// Runs until q; the caller then shuts down.
    func run() async {
        let terminal = Terminal()
        defer { terminal.restore() }
        let (events, sink) = AsyncStream<Event>.makeStream()
        let keys = terminal.keys()
        let updates = app.entries.updates()
        let status = app.status.updates()
        let live = app.feed.status.updates()
        let pages = app.pages
        let controllerEvents = app.controller.events()
        let feeders = [
            Task { for await key in keys { sink.yield(.key(key)) }; sink.yield(.ended) },
            Task { for await _ in updates { sink.yield(.changed) } },
            Task { for await _ in status { sink.yield(.changed) } },
            Task { for await _ in live { sink.yield(.changed) } },
            Task { @MainActor in
                // The paging state (loading, more, errors) redraws too.
                while !Task.isCancelled {
                    await withCheckedContinuation { continuation in
                        withObservationTracking { _ = (pages.isLoadingPage, pages.hasMore, pages.pageError) } onChange: { continuation.resume() }
                    }
                    sink.yield(.changed)
                }
            },
            Task {
                for await event in controllerEvents {
                    if event.kind == .progress { continue }
                    sink.yield(.changed)
                }
            },
        ]
        defer { feeders.forEach { $0.cancel() } }

        draw(terminal)
        for await event in events {
            switch event {
            case .ended: return
            case .changed: break
            case .key(let key): if !handle(key) { return }
            }
            draw(terminal)
        }
    }

    /// Returns `false` to quit.
    private func handle(_ key: Terminal.Key) -> Bool {
        if key == .interrupt { return false }
        if var text = draft {
            switch key {
            case .enter:
                if !text.trimmingCharacters(in: .whitespaces).isEmpty {
                    let app = app
                    // Stored in a moment (one transaction); the list shows it as pending.
                    Task { _ = try? await app.post(text) }
                }
                draft = nil
            case .escape: draft = nil
            case .backspace: if !text.isEmpty { text.removeLast() }; draft = text
            case .character(let character): text.append(character); draft = text
            default: break
            }
            return true
        }
        switch key {
        case .character("q"): return false
        case .character("r"): Task { await app.refresh() }
        case .character("p"): draft = ""
        case .character("m"): loadOlder()
        case .character("j"), .down:
            let last = max(0, app.entries.fetchedObjects.count - 1)
            // Scrolling past the end loads the older posts.
            if top >= last - listHeight { loadOlder() }
            top = min(top + 1, last)
        case .character("k"), .up: top = max(top - 1, 0)
        default: break
        }
        return true
    }

    /// The list's height at the last draw: scrolling near its end loads more.
    private var listHeight = 1

    private func loadOlder() {
        let app = app
        guard app.pages.hasMore, !app.pages.isLoadingPage else { return }
        Task { await app.loadOlderPosts() }
    }

    /// The paging line under the list: loading, the end, or why older posts did not come.
    private var pagingLine: String {
        if app.pages.isLoadingPage { return "loading older posts…" }
        if let error = app.pages.pageError { return "older posts: \(error.plainFailure(app: "timeline").clause)" }
        return app.pages.hasMore ? "m loads older posts" : "the beginning of the timeline"
    }

    private func draw(_ terminal: Terminal) {
        let (width, height) = terminal.size
        let now = Date()
        let entries = app.entries.fetchedObjects
        // Read at draw time: every redraw shows the controller as it is now.
        let estimate = app.controller.connectionSnapshot
        var lines = [
            TextLayout.fit("Timeline (\(entries.count) posts, \(entries.filter(\.hasAvatar).count) avatars)", trailer: "", width: width),
            TextLayout.fit(TimelinePresentation.networkLine(link: link, quality: estimate.quality, limit: estimate.concurrencyLimit, activity: app.controller.activity, paused: estimate.pausedCategories), trailer: "", width: width),
            String(repeating: "─", count: width),
        ]
        // Queued posts are in the list (◌ sending…); here, how the latest ones ended.
        let sent = app.sentPosts.filter { !$0.isQueued }.suffix(2).map(TimelinePresentation.sentLine)
        listHeight = max(1, height - lines.count - 4 - sent.count)
        top = min(top, max(0, entries.count - listHeight))
        lines += entries.dropFirst(top).prefix(listHeight).map { TimelinePresentation.entryLine($0, width: width) }
        if entries.isEmpty { lines.append(app.status.isSyncing || app.pages.isLoadingPage ? "syncing…" : "(no posts cached yet)") }
        while lines.count < height - 4 - sent.count { lines.append("") }
        lines.append(TextLayout.fit(pagingLine, trailer: "", width: width))
        lines += sent.map { TextLayout.fit($0, trailer: "", width: width) }
        lines.append(String(repeating: "─", count: width))
        // Live, the feed's state says it all ("live", "catching up", "offline"); else the last refresh's.
        let state = app.isLive ? app.feed.status.state : app.status.state
        lines.append(TextLayout.fit(state.summary(now: now, quality: estimate.quality, app: "timeline"), trailer: "", width: width))
        if let draft {
            lines.append(TextLayout.fit("post> \(draft)▏", trailer: "  ⏎ send · esc cancel", width: width))
        } else {
            lines.append(TextLayout.fit("r refresh · p post · j/k scroll · m older · q quit", trailer: "", width: width))
        }
        terminal.draw(lines)
    }
}
