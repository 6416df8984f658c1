// timeline: the MVC-N talk's Twitter-like app, built on Depot.
//
// The timeline comes first, posts must go out, avatars can wait. With no
// --server it starts the embedded depot-server, shaped by --link, so a bad
// network is one flag away.
import ArgumentParser
import DemoServer
import Depot
import DepotStore
import ExampleSupport
import Foundation
import TextLayout
import TimelineKit

@main
struct TimelineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "timeline",
        abstract: "Posts and avatars under a bad network: the MVC-N talk's timeline app, built on Depot.",
        discussion: """
            With no --server, it starts the embedded depot-server on 127.0.0.1 and shapes its link with --link.
            Keys in the interactive view: r refresh (the newest page again), p write a post (⏎ sends, esc cancels), \
            j/k scroll, m load older posts (scrolling past the end does too), q quit. The pages loaded are kept in \
            the cache: a later run, offline too, shows them and goes on from the oldest. The interactive view is \
            live: posts and deletions made elsewhere appear as they happen (server-sent events), and the status \
            line says live, catching up or offline. --follow prints each change as it reaches the cache.
            """)

    @Option(help: "The link to simulate: fast, 3g, edge, offline, or KBPS,RTTMS such as 300,250 (default: fast).")
    var link: String?

    @Option(help: "A running depot-server to use instead of the embedded one (with --link, its link is set through /_control).")
    var server: String?

    @Option(help: "The cache file (default: $XDG_CACHE_HOME/timeline/cache.sqlite or ~/.cache/timeline/cache.sqlite).")
    var cache: String?

    @Option(help: "Write the session's waterfall chart (SVG) here at exit.")
    var trace: String?

    @Option(help: "Post this text, then quit at once: the post is stored first, then sent within the grace period (or on a later run); avatars are cancelled.")
    var post: String?

    @Option(parsing: .unconditional, help: "Seconds (fractions too, such as 0.5) that posts get to go out when quitting.")
    var grace = 10.0

    @Option(help: "The handle to post as.")
    var author = "you"

    @Flag(help: "Send the posts waiting from earlier runs, refresh, fetch the avatars, print the timeline and exit.")
    var once = false

    @Option(parsing: .unconditional, help: "Seconds between automatic refreshes in the interactive view, with --no-live.")
    var refreshInterval = 30

    @Flag(inversion: .prefixedNo, help: "Keep the interactive view live through the server's event stream instead of refreshing on a timer.")
    var live = true

    @Flag(help: "Print each post and deletion as it reaches the cache, like tail -f, from where the cache is (a first run starts after the current timeline); stop with Ctrl-C.")
    var follow = false

    @Flag(help: "With --follow: one JSON object a line, {\"change\":\"post\",\"id\":N,\"author\":…,\"text\":…} or {\"change\":\"delete\",\"id\":N}.")
    var json = false

    @Option(parsing: .unconditional, help: "Posts per page: the newest page, and each page of older posts.")
    var pageSize = TimelinePages.defaultLimit

    @Option(parsing: .unconditional, help: "With --once: load this many pages of older posts after the newest, then print.")
    var older = 0

    @Option(parsing: .unconditional, help: "Avatar size in bytes on the embedded server.")
    var avatarBytes = 20_000

    func validate() throws {
        guard refreshInterval >= 1 else { throw ValidationError("--refresh-interval must be at least 1 second") }
        guard grace.isFinite, (0...3_600).contains(grace) else { throw ValidationError("--grace must be between 0 and 3600 seconds") }
        guard (100...10_000_000).contains(avatarBytes) else { throw ValidationError("--avatar-bytes must be between 100 and 10000000") }
        guard (1...200).contains(pageSize) else { throw ValidationError("--page-size must be between 1 and 200") }
        guard (0...1_000).contains(older) else { throw ValidationError("--older must be between 0 and 1000") }
        if let post, post.count > 1_000 { throw ValidationError("--post is too long (the server takes up to 280 characters)") }
        if follow, post != nil || once { throw ValidationError("--follow cannot be combined with --post or --once") }
        if json, !follow { throw ValidationError("--json goes with --follow") }
    }

    @MainActor
    mutating func run() async throws {
        let profile: LinkProfile
        do {
            profile = try LinkProfile(link ?? "fast")
        } catch {
            throw ValidationError(error.description)
        }
        let store: Store
        do {
            store = try ExampleSupport.openCache(
                app: "timeline", path: cache, migrator: TimelineSchema.migrator,
                keeping: [.table(PendingPost.databaseTableName)])
        } catch {
            throw ExampleSupport.tell(error, app: "timeline", while: .opening, cacheFile: cache)
        }
        do {
            try await run(profile: profile, store: store)
        } catch let error as DepotError {
            // Told in words, never as a description (an operation's name, SQLite's message).
            throw ExampleSupport.tell(error, app: "timeline", while: post == nil ? .reading : .saving("your post"), cacheFile: cache)
        }
    }

    @MainActor
    func run(profile: LinkProfile, store: Store) async throws {

        // The server: the given one, or the embedded one with the link applied.
        var embedded: DemoServer?
        let base: URL
        if let server {
            guard let url = URL(string: server), url.scheme != nil else { throw ValidationError("--server needs an absolute URL") }
            base = url
        } else if profile.isOffline {
            // No server at all: connections are refused, as with no network.
            base = URL(string: "http://127.0.0.1:9")!
        } else {
            var configuration = DemoServer.Configuration(port: 0, epoch: Date(), conditions: profile.conditions)
            configuration.avatarBytes = avatarBytes
            let started = try await DemoServer.start(configuration)
            embedded = started
            base = started.baseURL
        }

        let recorder = trace == nil ? nil : TraceRecorder()
        var configuration = NetworkController.Configuration(baseURL: base, transport: ExampleSupport.liveTransport(), observability: .init(notificationCenter: nil))
        configuration.store = store
        configuration.observability.trace = recorder
        configuration.conditions.rules = TimelineApp.qualityRules
        if post != nil || once || (!Terminal.isInteractive && !follow) { configuration.limits.longestTransfer = ExampleSupport.oneShotTransferLimit }
        let controller = NetworkController(configuration: configuration)
        if server != nil, link != nil {
            // An external depot-server is shaped through its control route,
            // only when asked: without --link nothing but the timeline's own
            // requests goes to it.
            _ = try await controller.perform(SetServerLink(profile: profile))
        }

        if follow {
            await Follow.run(try LiveFeed(TimelineFeed(), controller: controller), json: json)
            _ = await controller.shutdown(grace: .zero)
            await embedded?.stop()
            return
        }
        let interactive = post == nil && !once && Terminal.isInteractive
        let app = try TimelineApp(controller: controller, author: author, autoRefresh: interactive ? .seconds(refreshInterval) : nil, live: interactive && live, waitsForNetwork: interactive, pageSize: pageSize)
        var output: [String] = []
        var failure: (any Error)?
        var stillQueued = 0
        if let post {
            // Stored first; then quit right after pressing send: the single
            // decision point at exit gives it the grace to go out.
            do {
                try await app.post(post)
            } catch {
                failure = error
            }
        } else if !interactive {
            do {
                // Posts from earlier runs go first, in order.
                stillQueued = await app.sendPending()
                await app.refresh()
                for _ in 0..<older where app.pages.hasMore && app.pages.pageError == nil {
                    await app.loadOlderPosts()
                }
                try app.entries.performFetch()
                if controller.quality != .offline {
                    // Offline, avatar GETs would wait for the network: a one-shot run shows what is cached.
                    app.requestMissingAvatars()
                    await controller.waitUntilIdle()
                    try app.entries.performFetch()
                }
                output += TimelinePresentation.list(app, width: 100, now: Date(), link: profile)
                // Shown once: the rejected posts leave the timeline.
                try await app.dismissRejected()
            } catch {
                failure = error  // still shut down, write the trace and stop the server
            }
        } else {
            await TimelineView(app: app, link: profile).run()
        }
        let report = await app.shutdown(grace: .milliseconds(Int((grace * 1_000).rounded())))
        output += TimelinePresentation.quitLines(app, report: report)
        if let trace, let recorder {
            try recorder.svg().write(to: URL(fileURLWithPath: trace), atomically: true, encoding: .utf8)
            output.append("waterfall written to \(trace)")
        }
        ExampleSupport.write(output)
        await embedded?.stop()
        if let failure { throw failure }
        if stillQueued > 0 {
            // The entry's last error is a description, for logs: not for the terminal.
            let sentence = "\(stillQueued) \(stillQueued == 1 ? "post stays" : "posts stay") queued, to be sent when online (it could not be sent in this run)"
            ExampleSupport.write([sentence], to: .standardError)
            throw ExitCode(1)
        }
        if app.sentPosts.contains(where: { if case .rejected = $0.state { true } else { false } }) {
            throw ExitCode(1)
        }
    }
}

/// Sets an external depot-server's link (`POST _control`).
struct SetServerLink: NetworkOperation {
    typealias Output = NetworkResponse
    var profile: LinkProfile

    var request: NetworkRequest { .post("_control", json: profile.conditions) }
    var priority: Priority { .veryHigh }
}

extension LinkProfile {
    /// The depot-server conditions that make this link.
    var conditions: NetworkConditions {
        NetworkConditions(latencyMs: rttMs, bandwidthKbps: kbps, offline: isOffline)
    }
}
