import Depot
import Foundation

// README.md, "In 20 lines".

struct TopSongsFeed: Decodable, Sendable {
    struct Feed: Decodable, Sendable { var entry: [Entry] }
    struct Entry: Decodable, Sendable { var title: Label }
    struct Label: Decodable, Sendable { var label: String }
    var feed: Feed
}

enum ReadmeExample {
    struct FetchTopSongs: NetworkOperation {             // one type per endpoint
        var limit = 10
        var request: NetworkRequest { .get("/topsongs/limit=\(limit)/json") }
        var priority: Priority { .high }

        func process(_ response: NetworkResponse, context: OperationContext) async throws -> [String] {
            try response.decode(TopSongsFeed.self).feed.entry.map(\.title.label)
        }
    }

    @MainActor static func run() async throws {
        let controller = NetworkController(configuration: .init(   // injected, never a singleton
            baseURL: URL(string: "http://127.0.0.1:8080")!,
            adapters: [DefaultHeaders(["Accept": "application/json"])]
        ))
        let ticket = controller.enqueue(FetchTopSongs()) { result in    // main actor, always async, once
            print(result)
        }
        let songs = try await controller.perform(FetchTopSongs())      // or async/await
        let report = await controller.shutdown(grace: .seconds(5))     // cancel what can go
        _ = (ticket, songs, report)
    }
}
