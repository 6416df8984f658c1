import ArgumentParser
import Depot
import DepotStore
import ExampleSupport
import Foundation
import SenbeiKit

/// `senbei watch`: the CRM's live feed, one line per change as it reaches
/// the cache, until interrupted.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print contact and task changes as they happen, one line each, until interrupted.",
        discussion: """
            senbei watch follows the CRM's change feed and prints each contact or task change once it is in the cache. \
            It goes on from where the last run stopped (the cursor is kept in the cache), so changes made while it was \
            not running are printed first; a first run syncs silently and prints only later changes. It ends at control-C \
            (SIGINT), SIGTERM, or the end of its input when that is a terminal (control-D) or a pipe. What it is doing \
            (catching up, live, offline) goes to standard error. With --json, standard output holds one JSON object per \
            line: {"change":"contact","id":N,"name":…,"email":…,"company":…} or {"change":"task","id":N,"name":…,"due":…,"completed":…}.
            """)
    @OptionGroup var options: ServerOptions
    @Flag(help: "Print one JSON object per line instead of text.") var json = false

    enum Event: Sendable {
        case feed(LiveFeedEvent<CRMChange>)
        case status(LiveState?)
        case stop
    }

    @MainActor func run() async throws {
        let stop = StopRequests()
        let json = json
        try await Session.run(options) { session in
            try await session.withLogin { _ = try await session.app.login() }
            let live = session.app.live
            let (events, sink) = AsyncStream<Event>.makeStream()
            let feed = live.events()
            let status = live.status.updates()
            let forwarders = [
                Task { for await event in feed { sink.yield(.feed(event)) } },
                Task { for await state in status { sink.yield(.status(state.live)) } },
                Task { for await _ in stop.requests { sink.yield(.stop); return } },
            ]
            let watch = live.watch()
            defer {
                watch.cancel()
                forwarders.forEach { $0.cancel() }
            }
            var shown = StatusLine()
            for await event in events {
                switch event {
                case .stop:
                    return
                case .feed(.applied(let changes)):
                    // One write per batch; ExampleSupport makes the text terminal-safe
                    // (the JSON lines already are: they escape every control).
                    session.print(changes.map { json ? SenbeiPresentation.changeJSON($0) : SenbeiPresentation.changeLine($0) })
                case .feed(.replaced):
                    break  // a full sync: the state the changes start from, not a change
                case .feed(.skipped(let error)):
                    printError("skipped a change the server sent: \(SenbeiPresentation.message(for: error))")
                case .status(let state):
                    if let line = shown.update(state) { printError(line) }
                }
            }
        }
    }
}

/// What `senbei watch` says on standard error as the feed's state changes:
/// once per kind of state, never for each page of a catch-up.
struct StatusLine {
    static let catchingUp = "catching up…"
    static let live = "live: changes are printed as they happen."
    static let offline = "offline: waiting for the network…"
    static let reconnecting = "reconnecting…"

    private var last: String?

    /// The line to print for `state`, or `nil` when nothing new is to say.
    mutating func update(_ state: LiveState?) -> String? {
        let line: String? = switch state {
        case .catchingUp: Self.catchingUp
        case .live: Self.live
        case .offline: Self.offline
        // Opening the stream after a catch-up is no news; losing it is.
        case .connecting: last == Self.live || last == Self.offline ? Self.reconnecting : nil
        case .upToDate, nil: nil
        }
        guard let line, line != last else { return nil }
        last = line
        return line
    }
}
