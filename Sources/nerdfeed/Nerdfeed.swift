// nerdfeed, for now: a small end-to-end run of Depot against the embedded
// depot-server. It starts DemoServer on 127.0.0.1 (port 0), fetches the
// top-songs feed through a NetworkController and prints it. No internet is
// needed. The full reader (RSS, cache, interactive view) replaces this when
// it lands.
import DemoServer
import Depot
import DepotAsyncHTTPClient
import Foundation

/// The iTunes top-songs JSON shape: `feed.entry[].title.label`, `link[].attributes.href`.
struct TopSongsFeed: Decodable, Sendable {
    struct Label: Decodable, Sendable { var label: String }
    struct Link: Decodable, Sendable {
        struct Attributes: Decodable, Sendable { var href: String }
        var attributes: Attributes
    }
    struct Entry: Decodable, Sendable {
        var title: Label
        var link: [Link]
    }
    struct Feed: Decodable, Sendable { var entry: [Entry] }
    var feed: Feed
}

/// One endpoint, one type: GET /topsongs/limit=N/json.
struct FetchTopSongs: NetworkOperation {
    var limit = 10
    var request: Request { .get("/topsongs/limit=\(limit)/json") }
    var priority: Priority { .high }

    func process(_ response: Response, context: OperationContext) async throws -> [String] {
        try response.decode(TopSongsFeed.self).feed.entry.map(\.title.label)
    }
}

@main
struct Nerdfeed {
    static func main() async {
        do {
            try await DemoServer.withRunning(.init(epoch: Date())) { server in
                print("nerdfeed: embedded depot-server on \(server.baseURL.absoluteString)")
                // On Linux, AsyncHTTPClient is the faster transport (see BENCHMARKS.md).
                #if os(Linux)
                let transport: any Transport = AsyncHTTPClientTransport()
                #else
                let transport: any Transport = URLSessionTransport()
                #endif
                let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: transport))
                do {
                    let songs = try await controller.perform(FetchTopSongs())
                    print("Top \(songs.count) songs")
                    for (index, song) in songs.enumerated() {
                        print(String(format: "%3d. ", index + 1) + song)
                    }
                } catch {
                    print("nerdfeed: \(error)")
                }
                print(await controller.shutdown(grace: .seconds(2)))
            }
        } catch {
            print("nerdfeed: \(error)")
            exit(1)
        }
    }
}
