import ArgumentParser
import DemoServer
import Foundation

/// `depot-server`: the demo backend as its own process.
@main
struct DepotServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "depot-server",
        abstract: "A local HTTP backend for Depot's example apps: forum RSS/Atom and top songs, with ETags. Every GET route also answers HEAD."
    )

    @Option(help: "The port to listen on; 0 picks a free one and prints it.")
    var port: Int = 8080

    @Option(help: "The address to bind (loopback only).")
    var host: String = "127.0.0.1"

    @Option(help: "The seed all generated data comes from.")
    var seed: UInt64 = 1

    @Option(help: "Seconds between new forum posts.")
    var postInterval: Int = 60

    @Option(help: "How many forum posts exist at start (the feeds show the newest 50, or ?limit=N up to 20,000).")
    var initialPosts: Int = 20

    @Option(help: "Delay before every response, in milliseconds.")
    var latency: Int?

    @Option(help: "Stream bodies in paced chunks at this many kilobits per second.")
    var bandwidth: Int?

    @Option(help: "The fraction of requests (0...1) answered with 503.")
    var failRate: Double?

    mutating func validate() throws {
        if let failRate, !(0...1).contains(failRate) {
            throw ValidationError("--fail-rate must be between 0 and 1")
        }
    }

    mutating func run() async throws {
        let server = try await DemoServer.start(.init(
            host: host,
            port: port,
            seed: seed,
            initialPosts: max(0, initialPosts),
            postInterval: .seconds(max(1, postInterval)),
            epoch: Date(),
            conditions: NetworkConditions(latencyMs: latency, bandwidthKbps: bandwidth, failRate: failRate)
        ))
        // Written at once, not buffered: a script that reads the port from a pipe needs it now.
        let banner = """
            depot-server listening on \(server.baseURL.absoluteString)
            routes: /forum/rss  /forum/atom  /topsongs/limit=10/json  /faults/...  /_stats  POST /_control
            (every GET route also answers HEAD: the same status and headers, no body)

            """
        FileHandle.standardOutput.write(Data(banner.utf8))
        try await server.waitUntilStopped()
    }
}
