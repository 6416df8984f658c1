import AsyncHTTPClient
import DepotAsyncHTTPClient
import Foundation
import NIOCore
import Synchronization

/// Change to screen: a post accepted by depot-server, to its delivery by a
/// `ResultsController` in another process, over loopback, at 10 and 200
/// changes a second, against a floor measured in that process in the same run:
/// the same kind of row written into its store locally and delivered.
///
/// Three processes: depot-server (release), this one (the writer: `POST
/// /posts` on an open-loop schedule with raw AsyncHTTPClient), and the
/// follower (`depot-bench livefollower`, see ``follow(base:floorRate:)``). Both
/// clients stamp `CLOCK_MONOTONIC`, which every process on the machine shares.
enum LiveLatencyBench {
    /// One post: when its `POST` went out and when the server's answer arrived
    /// (the accepted time), in `CLOCK_MONOTONIC` ns.
    struct Post: Sendable {
        var id: Int
        var sent: Int64
        var accepted: Int64
    }

    static let rates = [10, 200]
    /// Floor writes a second in the follower, through the whole run.
    static let floorRate = 10

    static func run(binaries: String, seconds: Int) async throws {
        let depotServer = try DepotServerProcess.start("\(binaries)/depot-server", arguments: ["--port", "0", "--timeline-posts", "200"])
        defer { depotServer.stop() }
        let follower = try Follower.start(base: depotServer.base)
        defer { follower.stop() }
        say("livelatency: depot-server \(binaries)/depot-server at \(depotServer.base); follower pid \(follower.process.processIdentifier) (file-backed Store, AsyncHTTPClientTransport, LiveFeed watched, ResultsController on the newest 200 posts); \(seconds) s per rate; floor: \(floorRate) local writes/s in the follower")
        try await follower.waitUntilReady()
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let phases: [Phase]
        do {
            phases = try await measure(client, endpoint: depotServer.base + "/posts", follower: follower, seconds: seconds)
            try await client.shutdown()
        } catch {
            try? await client.shutdown()
            throw error
        }
        report(phases)
    }

    /// What one rate measured, in ms.
    struct Phase {
        var rate: Int
        /// Accepted (the POST's answer arrived) → delivered in the follower.
        var latencies: [Double]
        /// The POST's start → delivered.
        var fromSent: [Double]
        var roundTrips: [Double]
        /// The follower's local writes → delivered, during this rate.
        var floor: [Double]
        /// Posts never delivered.
        var lost: Int
    }

    static func measure(_ client: HTTPClient, endpoint: String, follower: Follower, seconds: Int) async throws -> [Phase] {
        // Warm-up: connections, the server's and the follower's first posts.
        let warmUp = try await post(client, endpoint, rate: 10, count: 20)
        try await follower.waitForDeliveries(of: warmUp.map(\.id))
        var phases: [Phase] = []
        for rate in rates {
            let start = LiveTimeline.monotonicNanoseconds()
            let posts = try await post(client, endpoint, rate: rate, count: rate * seconds)
            let lost = try await follower.waitForDeliveries(of: posts.map(\.id))
            let end = LiveTimeline.monotonicNanoseconds()
            let delivered = follower.deliveries()
            let milliseconds = { (from: Int64, to: Int64) in Double(to - from) / 1e6 }
            let received = posts.compactMap { post in delivered[post.id].map { (post, $0) } }
            let floor = follower.floorSamples().filter { $0.start >= start && $0.start < end }
            phases.append(Phase(
                rate: rate,
                latencies: received.map { milliseconds($0.0.accepted, $0.1) },
                fromSent: received.map { milliseconds($0.0.sent, $0.1) },
                roundTrips: posts.map { milliseconds($0.sent, $0.accepted) },
                floor: floor.map { milliseconds($0.start, $0.delivered) },
                lost: lost))
            // A quiet second between rates: the last posts' writes and deliveries
            // end before the next rate's floor samples begin.
            try await Task.sleep(for: .seconds(1))
        }
        return phases
    }

    static func report(_ phases: [Phase]) {
        func ms(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }
        let q = LiveTimeline.quantile
        for phase in phases {
            say(String(format: "  %3d changes/s: %5d posts, %d lost; accepted → delivered p50 %@ p90 %@ p99 %@ max %@ ms; from the POST's start p50 %@ ms; POST round trip p50 %@ ms",
                       phase.rate, phase.latencies.count + phase.lost, phase.lost, ms(q(phase.latencies, 0.5)), ms(q(phase.latencies, 0.9)), ms(q(phase.latencies, 0.99)), ms(phase.latencies.max() ?? .nan),
                       ms(q(phase.fromSent, 0.5)), ms(q(phase.roundTrips, 0.5))))
            say(String(format: "        floor: %5d local writes; store.write → delivered p50 %@ p90 %@ p99 %@ max %@ ms; p50 ratio %.2f×",
                       phase.floor.count, ms(q(phase.floor, 0.5)), ms(q(phase.floor, 0.9)), ms(q(phase.floor, 0.99)), ms(phase.floor.max() ?? .nan), q(phase.latencies, 0.5) / q(phase.floor, 0.5)))
        }
        let ratios = phases.map { q($0.latencies, 0.5) / q($0.floor, 0.5) }
        let joined = { (values: [String]) in values.joined(separator: " / ") }
        SummaryRow.print([
            SummaryRow("live: change to screen, another process over loopback, \(joined(phases.map { "\($0.rate)" })) changes/s, p50 vs a local write's (floor)",
                       target: "p50 ≤ 2× floor",
                       "\(joined(phases.map { ms(q($0.latencies, 0.5)) })) ms (\(joined(ratios.map(SummaryRow.times))) floor's \(joined(phases.map { ms(q($0.floor, 0.5)) })) ms)",
                       met: ratios.allSatisfy { $0 <= 2 } && phases.allSatisfy { $0.lost == 0 }),
            SummaryRow("live: the same, p99; floor p99",
                       "\(joined(phases.map { ms(q($0.latencies, 0.99)) })) ms; floor \(joined(phases.map { ms(q($0.floor, 0.99)) })) ms"),
        ])
    }

    /// Posts `count` times at `rate` a second on a fixed schedule (each post
    /// goes out when due, whether or not the ones before were answered), and
    /// returns them in order.
    static func post(_ client: HTTPClient, _ endpoint: String, rate: Int, count: Int) async throws -> [Post] {
        try await withThrowingTaskGroup(of: Post.self) { group in
            let start = ContinuousClock.now + .milliseconds(20)
            for index in 0..<count {
                try await Task.sleep(until: start + .nanoseconds(Int64(index) * 1_000_000_000 / Int64(rate)), clock: .continuous)
                group.addTask {
                    var request = HTTPClientRequest(url: endpoint)
                    request.method = .POST
                    request.headers.add(name: "Content-Type", value: "application/json")
                    request.body = .bytes(ByteBuffer(string: #"{"text":"live \#(index)","author":"bench"}"#))
                    let sent = LiveTimeline.monotonicNanoseconds()
                    let response = try await client.execute(request, timeout: .seconds(10))
                    let body = try await response.body.collect(upTo: 1 << 16)
                    let accepted = LiveTimeline.monotonicNanoseconds()
                    struct Created: Decodable { var id: Int }
                    guard response.status == .created else { throw CocoaError(.fileReadUnknown, userInfo: [NSLocalizedDescriptionKey: "POST /posts answered \(response.status)"]) }
                    return Post(id: try JSONDecoder().decode(Created.self, from: Data(buffer: body)).id, sent: sent, accepted: accepted)
                }
            }
            var posts: [Post] = []
            for try await post in group { posts.append(post) }
            return posts.sorted { $0.id < $1.id }
        }
    }
}

// MARK: - The follower process

extension LiveLatencyBench {
    /// `depot-bench livefollower` as a child, and what it reported so far.
    // @unchecked: `process` and `input` are set once and used by the task
    // that started the follower; the reports are behind their Mutex.
    final class Follower: @unchecked Sendable {
        struct Reports {
            var ready = false
            /// Post id → when its results delivered it.
            var delivered: [Int: Int64] = [:]
            var floor: [(start: Int64, delivered: Int64)] = []
            var ended = false
            /// Waits for a fact about the reports: resumed (true) when it
            /// holds, or (false) at its deadline or the follower's end.
            var waiters: [UUID: (holds: @Sendable (Reports) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = [:]

            /// The waiters whose fact holds now, or all of them once the follower ended.
            mutating func takeSettled() -> [(CheckedContinuation<Bool, Never>, Bool)] {
                var settled: [(CheckedContinuation<Bool, Never>, Bool)] = []
                for (id, waiter) in waiters {
                    let holds = waiter.holds(self)
                    guard holds || ended else { continue }
                    settled.append((waiter.continuation, holds))
                    waiters[id] = nil
                }
                return settled
            }
        }

        let process: Process
        private let input: Pipe
        private let reports = Mutex(Reports())

        private init(process: Process, input: Pipe) {
            self.process = process
            self.input = input
        }

        static func start(base: String) throws -> Follower {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            process.arguments = ["livefollower", base, "\(floorRate)"]
            let output = Pipe()
            let input = Pipe()
            process.standardOutput = output
            process.standardInput = input
            try process.run()
            let follower = Follower(process: process, input: input)
            Thread.detachNewThread { follower.read(output.fileHandleForReading) }
            return follower
        }

        /// Reads the follower's lines until it exits.
        private func read(_ handle: FileHandle) {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                guard let last = pending.lastIndex(of: UInt8(ascii: "\n")) else { continue }
                let lines = String(decoding: pending[..<last], as: UTF8.self).split(separator: "\n")
                pending.removeSubrange(...last)
                let settled = reports.withLock { reports in
                    for line in lines {
                        let fields = line.split(separator: " ")
                        switch fields.first {
                        case "ready": reports.ready = true
                        case "d" where fields.count == 3:
                            if let id = Int(fields[1]), let at = Int64(fields[2]) { reports.delivered[id] = at }
                        case "f" where fields.count == 3:
                            if let start = Int64(fields[1]), let at = Int64(fields[2]) { reports.floor.append((start, at)) }
                        default:
                            FileHandle.standardError.write(Data("follower: \(line)\n".utf8))
                        }
                    }
                    return reports.takeSettled()
                }
                for (continuation, holds) in settled { continuation.resume(returning: holds) }
            }
            let settled = reports.withLock { reports in
                reports.ended = true
                return reports.takeSettled()
            }
            for (continuation, holds) in settled { continuation.resume(returning: holds) }
        }

        /// Waits until `holds` is true of the reports (true), or `timeout` of
        /// real time passed or the follower ended (false): a fact, with a
        /// deadline after which the bench reports what never came.
        private func wait(timeout: Duration, until holds: @escaping @Sendable (Reports) -> Bool) async -> Bool {
            let id = UUID()
            let deadline = Task { [self] in
                try? await Task.sleep(for: timeout)
                let waiter = self.reports.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.continuation.resume(returning: false)
            }
            defer { deadline.cancel() }
            return await withCheckedContinuation { continuation in
                let now: Bool? = reports.withLock { reports in
                    if holds(reports) { return true }
                    if reports.ended { return false }
                    reports.waiters[id] = (holds, continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        }

        func deliveries() -> [Int: Int64] { reports.withLock { $0.delivered } }
        func floorSamples() -> [(start: Int64, delivered: Int64)] { reports.withLock { $0.floor } }

        /// Waits until the follower says it is live (60 s at most).
        func waitUntilReady() async throws {
            guard await wait(timeout: .seconds(60), until: { $0.ready }) else {
                throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "the follower did not go live"])
            }
        }

        /// Waits until every id was delivered, or 10 s passed; returns how many were not.
        @discardableResult
        func waitForDeliveries(of ids: [Int]) async throws -> Int {
            _ = await wait(timeout: .seconds(10)) { reports in ids.allSatisfy { reports.delivered[$0] != nil } }
            return reports.withLock { reports in ids.count { reports.delivered[$0] == nil } }
        }

        /// Closes its standard input, which ends it, and waits for it.
        func stop() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }
}
