// nerdfeed: an offline-first RSS and top-songs reader built on Depot.
//
// The view layer (this target) reads only from the cache, through a
// ResultsController (the feed), a LiveValue (the top songs) and their
// SyncStatus; NerdfeedKit's operations fill the cache.
// With no URL it starts the embedded depot-server, so it needs no internet.
import ArgumentParser
import DemoServer
import Depot
import DepotStore
import ExampleSupport
import Foundation
import NerdfeedKit

@main
struct NerdfeedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nerdfeed",
        abstract: "An offline-first RSS and top-songs reader built on Depot.",
        discussion: "With no --feed, it starts the embedded depot-server on 127.0.0.1 and reads from it.")

    @Option(help: "The RSS or Atom feed to read (default: the embedded depot-server's forum feed).")
    var feed: String?

    @Option(help: "The base URL of the top-songs service, which serves topsongs/limit=N/json (default: the embedded server).")
    var songs: String?

    @Option(parsing: .unconditional, help: "The port of the embedded depot-server (0 picks a free one). A fixed port keeps item links, and so the cache, the same from run to run.")
    var port = 8088

    @Option(help: "The cache file (default: $XDG_CACHE_HOME/nerdfeed/cache.sqlite or ~/.cache/nerdfeed/cache.sqlite).")
    var cache: String?

    @Flag(help: "Print the list once and exit.")
    var once = false

    @Flag(help: "Print the list once as JSON and exit.")
    var json = false

    @Flag(help: "Use the cache only: make no request.")
    var offline = false

    @Option(parsing: .unconditional, help: "Seconds between automatic refreshes in the interactive view.")
    var refreshInterval = 60

    @Option(parsing: .unconditional, help: "How many items to print with --once.")
    var limit = 50

    @Option(parsing: .unconditional, help: "How many of the newest items of each feed the cache keeps; read items are kept too.")
    var keep = NerdfeedSchema.defaultKeptItems

    func validate() throws {
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535 (0 picks a free port)") }
        guard limit >= 0 else { throw ValidationError("--limit cannot be negative") }
        guard keep >= 0 else { throw ValidationError("--keep cannot be negative") }
        guard (1...86_400).contains(refreshInterval) else { throw ValidationError("--refresh-interval must be between 1 and 86400 seconds") }
    }

    @MainActor
    mutating func run() async throws {
        // Eviction runs at open, a moment after each sync, and before a one-shot run exits.
        let store: Store
        do {
            store = try ExampleSupport.openCache(app: "nerdfeed", path: cache, migrator: NerdfeedSchema.migrator, retention: NerdfeedSchema.retention(keep: keep))
        } catch {
            throw ExampleSupport.tell(error, app: "nerdfeed", while: .opening, cacheFile: cache)
        }
        do {
            try await run(with: store)
        } catch let error as DepotError {
            // Told in words, never as a description (an operation's name, SQLite's message).
            throw ExampleSupport.tell(error, app: "nerdfeed", while: .reading, cacheFile: cache)
        }
    }

    @MainActor
    func run(with store: Store) async throws {

        // Where to read from: the given URLs, or the embedded server.
        var server: DemoServer?
        let feedURL: URL
        var songsURL = songs.flatMap(URL.init(string:))
        if let feed {
            guard let url = URL(string: feed), url.scheme != nil else { throw ValidationError("--feed needs an absolute URL") }
            feedURL = url
        } else {
            let embedded = DemoServer.Configuration(port: port, epoch: Date())
            if !offline {
                do {
                    server = try await DemoServer.start(embedded)
                } catch {
                    throw ValidationError("cannot start the embedded depot-server on port \(port) (\(error)); try --port 0 or --feed URL")
                }
            }
            let base = server?.baseURL ?? URL(string: "http://\(embedded.host):\(port)")!
            feedURL = base.appending(path: "forum/rss")
            if songsURL == nil { songsURL = base }
        }

        let transport: any Transport
        if offline {
            // No request will be made: skip starting an HTTP client at all.
            transport = FileTransport()
        } else {
            transport = ExampleSupport.liveTransport()
        }
        var configuration = NetworkController.Configuration(baseURL: songsURL, transport: transport, observability: .init(notificationCenter: nil))
        configuration.store = store
        if once || json || !Terminal.isInteractive { configuration.limits.longestTransfer = ExampleSupport.oneShotTransferLimit }
        let controller = NetworkController(configuration: configuration)
        let app = try NerdfeedApp(
            controller: controller,
            feedURL: feedURL,
            // A one-shot run prints `limit` items: it needs no more rows than that.
            itemLimit: once || json ? limit : NerdfeedApp.defaultItemLimit,
            autoRefresh: once || json ? nil : .seconds(refreshInterval),
            offline: offline,
            // A one-shot run prints what it has and says why, instead of waiting for a network.
            waitsForNetwork: !(once || json || !Terminal.isInteractive))

        var syncFailed = false
        if once || json || !Terminal.isInteractive {
            syncFailed = try await printOnce(app)
            // The eviction a sync schedules would not outlive the process.
            // Housekeeping: a cache another process holds, or a full disk,
            // is the status line's to tell, and the next run evicts.
            _ = try? await store.evict()
        } else {
            let view = InteractiveView(app: app, controller: controller, offline: offline)
            await view.run()
        }
        _ = await controller.shutdown(grace: .seconds(2))
        await server?.stop()
        // The list and its error line are printed; a script can still tell.
        if syncFailed { throw ExitCode(1) }
    }

    /// `--once` and `--json`: wait for the sync (unless offline), print, return.
    /// - Returns: Whether the sync failed (the cached list was printed with the error line).
    @MainActor
    func printOnce(_ app: NerdfeedApp) async throws -> Bool {
        if !offline {
            await app.refresh()
            // The refresh has committed; make sure the items and the songs show
            // that commit before printing (they would catch up a moment later
            // on their own).
            try app.items.performFetch()
            await app.store.settled()
        }
        let now = Date()
        let items = Array(app.items.fetchedObjects.prefix(limit))
        if json {
            let data = try NerdfeedPresentation.json(items: items, songs: app.songs.value ?? [], feed: app.feedStatus.state, offlineMode: offline, now: now)
            FileHandle.standardOutput.write(data + Data("\n".utf8))
            return !offline && app.feedStatus.state.lastError != nil
        }
        var lines = items.map { NerdfeedPresentation.itemLine($0, width: 100, now: now) }
        if items.isEmpty { lines.append("(no items)") }
        lines.append("-- " + NerdfeedPresentation.statusLine(app.feedStatus.state, offlineMode: offline, now: now))
        ExampleSupport.write(lines)
        return !offline && app.feedStatus.state.lastError != nil
    }
}
