import Depot
import DepotTesting
import Foundation
import Synchronization

/// 200 mixed operations (100 × 50 KB low-priority images, 100 × 2 KB normal
/// JSON, interleaved) on three simulated links, with Depot's adaptive defaults
/// against fixed concurrency. Simulated time on a ManualClock: the numbers are
/// the same on every run and every machine.
enum ConditionsBench {
    struct Profile {
        var name: String
        var link: NetworkSimulator.Link
    }

    static let profiles = [
        Profile(name: "fast (100 Mbit/s, 2 ms)", link: .init(bandwidth: 100_000_000, rtt: .milliseconds(2))),
        Profile(name: "3G-like (2 Mbit/s, 100 ms)", link: .init(bandwidth: 2_000_000, rtt: .milliseconds(100))),
        Profile(name: "EDGE-like (256 kbit/s, 400 ms)", link: .init(bandwidth: 256_000, rtt: .milliseconds(400))),
    ]

    struct Get: NetworkOperation {
        typealias Output = NetworkResponse
        var path: String
        var priority: Priority
        var category: OperationCategory
        var request: NetworkRequest { .get(path) }
        var coalescing: Coalescing { .never }
    }

    enum Setup: CustomStringConvertible {
        case adaptive
        case fixedFIFO(Int)
        case fixedPriorities(Int)

        var description: String {
            switch self {
            case .adaptive: "Depot adaptive (defaults)"
            case .fixedFIFO(let n): "fixed \(n), FIFO"
            case .fixedPriorities(let n): "fixed \(n), Depot priorities"
            }
        }
    }

    struct Result {
        var total: Duration
        var allJSON: Duration
        var finalLimit: Int
        /// With `DEPOT_BENCH_ETAGS=1`, the requests made for the 100 images.
        var imageRequests: Int?
    }

    static func simulate(_ profile: Profile, _ setup: Setup, traceTo folder: String?) async throws -> Result {
        let clock = ManualClock()
        // Sizes vary around their means (images 40-60 KB, JSON 1.5-2.5 KB), the
        // same for every setup: equal sizes would make transfers end in lockstep,
        // which no real network does.
        // DEPOT_BENCH_ETAGS=1 gives the images strong ETags, as real image servers
        // send: delayable GETs then come in byte ranges (DelayablePacing.rangeBytes).
        let etags = ProcessInfo.processInfo.environment["DEPOT_BENCH_ETAGS"] == "1"
        let simulator = NetworkSimulator(clock: clock, link: profile.link, routes: (0..<100).flatMap { i in [
            NetworkSimulator.Route(path: "/image/\(i)", bytes: 40_000 + (i * 7_919) % 20_001, headers: etags ? ["ETag": "\"image-\(i)\""] : [:]),
            NetworkSimulator.Route(path: "/json/\(i)", bytes: 1_500 + (i * 613) % 1_001),
        ] })
        let trace = TraceRecorder()
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://sim.test")!, transport: simulator, observability: .init(notificationCenter: nil), environment: .init(clock: clock))
        configuration.observability.trace = trace
        // DEPOT_BENCH_PACING_RTTS=1 tries another delayable pacing budget (round trips; "off" for none).
        if let text = ProcessInfo.processInfo.environment["DEPOT_BENCH_PACING_RTTS"] {
            configuration.conditions.delayablePacing = Double(text).map { .bandwidthDelay(roundTrips: $0) } ?? .off
        }
        let prioritised: Bool
        switch setup {
        case .adaptive:
            prioritised = true
        case .fixedFIFO(let n):
            configuration.limits.concurrency = .fixed(n)
            prioritised = false
        case .fixedPriorities(let n):
            configuration.limits.concurrency = .fixed(n)
            prioritised = true
        }
        let controller = NetworkController(configuration: configuration)
        var json: [Ticket] = []
        var all: [Ticket] = []
        for i in 0..<100 {
            let image = Get(path: "image/\(i)", priority: prioritised ? .low : .normal, category: prioritised ? .images : .default)
            all.append(controller.enqueue(image))
            let document = controller.enqueue(Get(path: "json/\(i)", priority: .normal, category: .default))
            json.append(document)
            all.append(document)
        }
        let settled = simulator.settled(with: controller)
        let jsonDone = Locked<Duration?>(nil)
        do {
            try await simulator.run(until: { [json, all] in
                if jsonDone.value == nil, json.allSatisfy(\.isFinished) { jsonDone.value = clock.elapsed }
                return all.allSatisfy(\.isFinished)
            }, settled: settled)
        } catch {
            say("\(profile.name), \(setup): \(error); activity \(controller.activity), \(controller.connectionSnapshot)")
            throw error
        }
        let total = clock.elapsed
        var imageRequests: Int?
        if etags, case .adaptive = setup {
            let ranged = simulator.records.filter { $0.path.hasPrefix("/image/") }.count
            say("\(profile.name): \(ranged) image requests for 100 images; estimate \(controller.connectionSnapshot)")
            imageRequests = ranged
        }
        if let folder, case .adaptive = setup {
            let file = profile.name.prefix { $0 != " " }.lowercased()
            try trace.svg().write(toFile: "\(folder)/conditions-\(file).svg", atomically: true, encoding: .utf8)
        }
        let limit = controller.concurrencyLimit
        _ = await controller.shutdown(grace: .zero)
        return Result(total: total, allJSON: jsonDone.value ?? total, finalLimit: limit, imageRequests: imageRequests)
    }

    static func run(writeTraces folder: String?) async throws {
        say("conditions: 200 operations (100 × ~50 KB low-priority images + 100 × ~2 KB JSON, interleaved), simulated time")
        var behind: [Double] = [], sooner: [Double] = [], imageRequests: [Int] = []  // by profile
        for profile in profiles {
            say("\n\(profile.name)")
            say("setup                               total      all JSON   final limit")
            let adaptive = try await simulate(profile, .adaptive, traceTo: folder)
            var fifo: [(Int, Result)] = []
            var prioritised: [(Int, Result)] = []
            for n in [1, 2, 4, 8, 16] {
                fifo.append((n, try await simulate(profile, .fixedFIFO(n), traceTo: nil)))
                prioritised.append((n, try await simulate(profile, .fixedPriorities(n), traceTo: nil)))
            }
            func line(_ label: String, _ result: Result) {
                say(label.padding(toLength: 34, withPad: " ", startingAt: 0), String(format: "%9.2f s  %9.2f s  %6d", result.total.seconds, result.allJSON.seconds, result.finalLimit))
            }
            line(Setup.adaptive.description, adaptive)
            for (n, result) in fifo { line(Setup.fixedFIFO(n).description, result) }
            for (n, result) in prioritised { line(Setup.fixedPriorities(n).description, result) }
            let bestTotal = fifo.map(\.1.total).min()!
            let bestJSON = fifo.map(\.1.allJSON).min()!
            say(String(format: "→ adaptive total is %+.1f%% vs the best fixed FIFO; all-JSON %.2fx faster than the best fixed FIFO (%@)",
                         (adaptive.total.seconds / bestTotal.seconds - 1) * 100, bestJSON.seconds / adaptive.allJSON.seconds,
                         adaptive.allJSON < bestJSON ? "better than every fixed setting" : "not better"))
            behind.append((adaptive.total.seconds / bestTotal.seconds - 1) * 100)
            sooner.append(bestJSON.seconds / adaptive.allJSON.seconds)
            if let requests = adaptive.imageRequests { imageRequests.append(requests) }
        }
        let totals = behind.map { SummaryRow.percent($0) }.joined(separator: " / ")
        if imageRequests.isEmpty {
            SummaryRow.print([
                SummaryRow("conditions: total behind the best fixed FIFO, fast / 3G-like / EDGE-like", target: "≤ 10%", totals, met: behind.allSatisfy { $0 <= 10 }),
                SummaryRow("conditions: all JSON done vs the best fixed FIFO", target: "sooner than every fixed FIFO",
                           sooner.map { String(format: "%.2f×", $0) }.joined(separator: " / ") + " sooner", met: sooner.allSatisfy { $0 > 1 }),
            ])
        } else {
            SummaryRow.print([
                SummaryRow("conditions with ETag'd images (byte ranges), fast / 3G-like / EDGE-like", target: "≤ 10%",
                           "\(totals); \(imageRequests.map(String.init).joined(separator: " / ")) image requests", met: behind.allSatisfy { $0 <= 10 }),
            ])
        }
    }
}

/// A tiny lock box for the benchmark's bookkeeping.
final class Locked<Value: Sendable>: Sendable {
    private let stored: Mutex<Value>
    init(_ value: Value) { stored = Mutex(value) }
    var value: Value {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

/// Prints without buffering, so nothing is lost if a run fails.
func say(_ items: String...) {
    FileHandle.standardOutput.write(Data((items.joined(separator: " ") + "\n").utf8))
}
