import ArgumentParser
import DemoServer
import Foundation

/// `depot-server`: the demo backend as its own process.
@main
struct DepotServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "depot-server",
        abstract: "A local HTTP backend for Depot's example apps and tests: feeds, a CRM with OAuth 2, a timeline, paging, faults and shaped network conditions.",
        discussion: DemoServer.routeSummary
    )

    @Option(parsing: .unconditional, help: "The port to listen on; 0 picks a free one and prints it.")
    var port: Int = 8080

    @Option(help: "The address to bind (loopback only).")
    var host: String = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The seed all generated data comes from.")
    var seed: UInt64 = 1

    @Option(parsing: .unconditional, help: "Seconds between new forum posts.")
    var postInterval: Int = 60

    @Option(parsing: .unconditional, help: "How many forum posts exist at start (the feeds show the newest 50, or ?limit=N up to 20,000).")
    var initialPosts: Int = 20

    @Option(parsing: .unconditional, help: "How many Timeline posts exist at start.")
    var timelinePosts: Int = 30

    @Option(parsing: .unconditional, help: "How many of the latest changes the Timeline and the CRM keep for resuming streams and /changes.")
    var changeHistory: Int = 1_000

    @Option(parsing: .unconditional, help: "Delay before every response, in milliseconds.")
    var latency: Int?

    @Option(parsing: .unconditional, help: "Stream bodies in paced chunks at this many kilobits per second.")
    var bandwidth: Int?

    @Option(parsing: .unconditional, help: "The fraction of requests (0...1) answered with 503.")
    var failRate: Double?

    @Option(parsing: .unconditional, help: "Seconds an access token from POST /oauth/token lasts (fractions allowed).")
    var tokenLifetime: Double = 3600

    mutating func validate() throws {
        if let failRate, !(0...1).contains(failRate) {
            throw ValidationError("--fail-rate must be between 0 and 1")
        }
        guard (0...65_535).contains(port) else { throw ValidationError("--port must be between 0 and 65535 (0 picks a free port)") }
        guard (1...86_400).contains(postInterval) else { throw ValidationError("--post-interval must be between 1 and 86400 seconds") }
        guard (0...20_000).contains(initialPosts) else { throw ValidationError("--initial-posts must be between 0 and 20000") }
        guard (0...1_000_000).contains(timelinePosts) else { throw ValidationError("--timeline-posts must be between 0 and 1000000") }
        guard (0...1_000_000).contains(changeHistory) else { throw ValidationError("--change-history must be between 0 and 1000000") }
        if let latency, !(0...600_000).contains(latency) { throw ValidationError("--latency must be between 0 and 600000 milliseconds") }
        if let bandwidth, !(1...10_000_000).contains(bandwidth) { throw ValidationError("--bandwidth must be between 1 and 10000000 kbit/s") }
        guard tokenLifetime.isFinite, (0.1...31_536_000).contains(tokenLifetime) else { throw ValidationError("--token-lifetime must be between 0.1 and 31536000 seconds") }
    }

    mutating func run() async throws {
        let server = try await DemoServer.start(.init(
            host: host,
            port: port,
            seed: seed,
            initialPosts: max(0, initialPosts),
            postInterval: .seconds(max(1, postInterval)),
            epoch: Date(),
            conditions: NetworkConditions(latencyMs: latency, bandwidthKbps: bandwidth, failRate: failRate),
            tokenLifetime: .milliseconds(Int64((tokenLifetime * 1000).rounded())),
            timelinePosts: timelinePosts,
            changeHistory: changeHistory
        ))
        // Written at once, not buffered: a script that reads the port from a pipe needs it now.
        FileHandle.standardOutput.write(Data(DemoServer.banner(listeningOn: server.baseURL).utf8))
        try await server.waitUntilStopped()
    }
}
