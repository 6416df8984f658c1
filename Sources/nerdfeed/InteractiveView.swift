import Depot
import DepotStore
import ExampleSupport
import Foundation
import TextLayout
import NerdfeedKit

/// The interactive terminal view. It reads only from the app's results
/// controller, live value and sync statuses, and redraws only when one of
/// them reports a change (or a key is pressed).
@MainActor
final class InteractiveView {
    enum Tab { case items, songs }

    enum Event {
        case key(Terminal.Key)
        case changed
        case progress(Double)
        case ended
    }

    private let app: NerdfeedApp
    private let controller: NetworkController
    private let offline: Bool
    private let connection: ConnectionStatus
    private var tab = Tab.items
    private var selection = 0
    private var detail: FeedItem?
    private var progress: Double?
    private var message: String?

    init(app: NerdfeedApp, controller: NetworkController, offline: Bool) {
        self.app = app
        self.controller = controller
        self.offline = offline
        self.connection = ConnectionStatus(controller: controller)
    }

    func run() async {
        let terminal = Terminal()
        defer { terminal.restore() }
        let (events, sink) = AsyncStream<Event>.makeStream()
        var feeders: [Task<Void, Never>] = []
        let keys = terminal.keys()
        feeders.append(Task { for await key in keys { sink.yield(.key(key)) }; sink.yield(.ended) })
        feeders.append(forward(app.items.updates(), to: sink))
        feeders.append(forward(app.songs.updates(), to: sink))
        feeders.append(forward(app.feedStatus.updates(), to: sink))
        feeders.append(forward(app.songsStatus.updates(), to: sink))
        // The progress bar of the first sync comes from the controller's progress events.
        let controllerEvents = controller.events()
        feeders.append(Task {
            for await event in controllerEvents where event.operation == "FetchForumFeed" {
                if let progress = event.progress, let expected = progress.expected, expected > 0 {
                    sink.yield(.progress(Double(progress.received) / Double(expected)))
                }
            }
        })
        // Another nerdfeed (a `--once` run in another terminal) may sync into
        // the same cache: its commits show here within a second.
        let store = app.store
        feeders.append(Task { await store.watchOtherProcesses(every: .seconds(1)) })
        defer { feeders.forEach { $0.cancel() } }

        draw(terminal)
        for await event in events {
            switch event {
            case .ended:
                return
            case .changed:
                break
            case .progress(let fraction):
                guard app.feedStatus.lastSynced == nil else { continue }
                progress = fraction
            case .key(let key):
                if detail != nil {
                    detail = nil
                } else if await handle(key) == false {
                    return
                }
            }
            draw(terminal)
        }
    }

    private func forward<S: AsyncSequence & Sendable>(_ sequence: S, to sink: AsyncStream<Event>.Continuation) -> Task<Void, Never> where S.Element: Sendable {
        Task {
            do {
                for try await _ in sequence { sink.yield(.changed) }
            } catch {
                sink.yield(.changed)
            }
        }
    }

    /// Returns `false` to quit.
    private func handle(_ key: Terminal.Key) async -> Bool {
        message = nil
        let count = tab == .items ? app.items.fetchedObjects.count : (app.songs.value ?? []).count
        switch key {
        case .character("q"), .interrupt:
            return false
        case .character("r"):
            if offline {
                message = "offline mode: no requests"
            } else {
                Task { await app.refresh() }
            }
        case .character("j"), .down:
            selection = min(selection + 1, max(0, count - 1))
        case .character("k"), .up:
            selection = max(selection - 1, 0)
        case .tab:
            tab = tab == .items ? .songs : .items
            selection = 0
        case .enter:
            guard tab == .items, app.items.fetchedObjects.indices.contains(selection) else { break }
            let item = app.items.fetchedObjects[selection]
            detail = item
            if !item.isRead { await app.markRead(item) }
        default:
            break
        }
        return true
    }

    private func draw(_ terminal: Terminal) {
        let (width, height) = terminal.size
        let now = Date()
        var lines: [String] = []
        let items = app.items.fetchedObjects
        let songs = app.songs.value ?? []
        let itemsTab = tab == .items ? "[ Forum (\(items.count)) ]" : "  Forum (\(items.count))  "
        let songsTab = tab == .songs ? "[ Top songs (\(songs.count)) ]" : "  Top songs (\(songs.count))  "
        lines.append(NerdfeedPresentation.fit("Nerdfeed  \(itemsTab) \(songsTab)", trailer: "", width: width))
        lines.append(String(repeating: "─", count: width))

        let listHeight = max(1, height - 5)
        if let detail {
            lines += NerdfeedPresentation.detailLines(detail, width: width, now: now, footer: "(marked read — press any key)")
        } else {
            let rows: [String] = tab == .items
                ? items.map { NerdfeedPresentation.itemLine($0, width: width - 2, now: now) }
                : songs.map { NerdfeedPresentation.songLine($0, width: width - 2) }
            selection = min(selection, max(0, rows.count - 1))
            let first = max(0, min(selection - listHeight / 2, rows.count - listHeight))
            for (offset, row) in rows.dropFirst(first).prefix(listHeight).enumerated() {
                let selected = first + offset == selection
                lines.append(selected ? "\u{1B}[7m> \(row)\u{1B}[0m" : "  \(row)")
            }
            if rows.isEmpty {
                let status = tab == .items ? app.feedStatus : app.songsStatus
                if status.isSyncing, status.lastSynced == nil, let progress {
                    lines.append("  " + NerdfeedPresentation.progressBar(progress, width: min(60, width - 2)))
                } else {
                    lines.append(status.isSyncing ? "  syncing…" : "  (nothing cached yet)")
                }
            }
        }
        while lines.count < height - 3 { lines.append("") }
        let status = tab == .items ? app.feedStatus : app.songsStatus
        let estimate = controller.connectionSnapshot
        lines.append(String(repeating: "─", count: width))
        let statusText = message ?? NerdfeedPresentation.statusLine(status.state, offlineMode: offline, quality: connection.quality, activity: controller.activity, now: now)
        lines.append(NerdfeedPresentation.fit(statusText, trailer: "", width: width))
        lines.append(NerdfeedPresentation.fit("r refresh · j/k move · ⏎ read · tab switch · q quit", trailer: "limit \(estimate.concurrencyLimit)", width: width))
        terminal.draw(lines)
    }
}
