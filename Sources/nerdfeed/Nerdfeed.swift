// nerdfeed, for now: a small end-to-end run of Depot against an embedded HTTP
// server. It starts a Hummingbird server on 127.0.0.1 (port 0) that serves a
// top-songs feed shaped like iTunes' JSON, fetches it through a
// NetworkController and prints it. No internet is needed. The full reader
// (RSS, cache, interactive view) replaces this when it lands.
import Depot
import DepotAsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// The iTunes top-songs JSON shape: `feed.entry[].title.label`, `link[].attributes.href`.
struct TopSongsFeed: Codable, Sendable {
    struct Label: Codable, Sendable { var label: String }
    struct Link: Codable, Sendable {
        struct Attributes: Codable, Sendable { var href: String }
        var attributes: Attributes
    }
    struct Entry: Codable, Sendable {
        var title: Label
        var link: [Link]
    }
    struct Feed: Codable, Sendable { var entry: [Entry] }
    var feed: Feed
}

/// One endpoint, one type: GET /topsongs/limit=N/json.
struct FetchTopSongs: NetworkOperation {
    var limit = 10
    var request: Depot.Request { .get("/topsongs/limit=\(limit)/json") }
    var priority: Priority { .high }

    func process(_ response: Depot.Response, context: OperationContext) async throws -> [String] {
        try response.decode(TopSongsFeed.self).feed.entry.map(\.title.label)
    }
}

/// The demo route: ten songs, generated.
func demoRouter() -> Router<BasicRequestContext> {
    let router = Router()
    router.get("/topsongs/:limit/json") { _, context -> Response in
        let text = context.parameters.get("limit") ?? "limit=10"
        let limit = Int(text.replacingOccurrences(of: "limit=", with: "")) ?? 10
        let artists = ["The Fetchers", "Cache Money", "Main Actor", "Lost Connection", "Retry After"]
        let entries = (1...max(1, min(limit, 100))).map { n in
            TopSongsFeed.Entry(
                title: .init(label: "Song \(n) - \(artists[n % artists.count])"),
                link: [
                    .init(attributes: .init(href: "http://127.0.0.1/songs/\(n)")),
                    .init(attributes: .init(href: "http://127.0.0.1/previews/\(n).m4a")),
                ]
            )
        }
        let body = try JSONEncoder().encode(TopSongsFeed(feed: .init(entry: entries)))
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }
    return router
}

@main
struct Nerdfeed {
    static func main() async {
        let quiet = Logger(label: "nerdfeed.server") { _ in SwiftLogNoOpLogHandler() }
        let (ports, portSignal) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: demoRouter(),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portSignal.yield(channel.localAddress?.port ?? 0)
                portSignal.finish()
            },
            logger: quiet
        )
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], cancellationSignals: [], logger: quiet)
        let server = Task { try await group.run() }
        var portIterator = ports.makeAsyncIterator()
        guard let port = await portIterator.next(), port > 0 else {
            print("nerdfeed: could not start the embedded server")
            exit(1)
        }

        // On Linux, AsyncHTTPClient is the faster transport (see BENCHMARKS.md).
        #if os(Linux)
        let transport: any Transport = AsyncHTTPClientTransport()
        #else
        let transport: any Transport = URLSessionTransport()
        #endif
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://127.0.0.1:\(port)")!, transport: transport))
        print("nerdfeed: embedded server on 127.0.0.1:\(port)")
        do {
            let songs = try await controller.perform(FetchTopSongs())
            print("Top \(songs.count) songs")
            for (index, song) in songs.enumerated() {
                print(String(format: "%3d. ", index + 1) + song)
            }
        } catch {
            print("nerdfeed: \(error)")
        }
        let report = await controller.shutdown(grace: .seconds(2))
        print(report)
        await group.triggerGracefulShutdown()
        _ = await server.result
    }
}
