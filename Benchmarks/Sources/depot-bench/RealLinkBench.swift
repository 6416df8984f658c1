#if canImport(Glibc)
import Glibc
#endif
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation

/// Issue 22's priority scenario on a link shaped by the kernel, beside the
/// same scenario on `NetworkSimulator`: 100 low-priority 20 KB transfers are
/// queued, and 2 s later one high-priority 40 KB transfer arrives. The row to
/// read is how long that one takes against its physical minimum (40 KB at the
/// link's rate), and the total time of all 101 against FIFO.
///
/// The real link is the loopback of a network namespace, `depotlink`, whose
/// `tbf` qdisc holds the rate (burst 32 KB, up to 500 ms of queue, as a home
/// router does). `depot-server` and the client both run inside it. Linux only,
/// as root; the namespace is made at the start and deleted at the end.
enum RealLinkBench {
    static let namespace = "depotlink"
    static let insideVariable = "DEPOT_REALLINK_INSIDE"

    struct Get: NetworkOperation {
        typealias Output = NetworkResponse
        var path: String
        var priority: Priority
        var category: OperationCategory
        var request: NetworkRequest { .get(path) }
        var coalescing: Coalescing { .never }
    }

    enum Setup: CustomStringConvertible, CaseIterable {
        case depot, depotUnpaced, fifo, fixedPriorities, fixedPriorities2

        var description: String {
            switch self {
            case .depot: "Depot (defaults)"
            case .depotUnpaced: "Depot, pacing off"
            case .fifo: "FIFO, fixed 6"
            case .fixedPriorities: "fixed 6, priorities"
            case .fixedPriorities2: "fixed 2, priorities"
            }
        }

        var policy: ConcurrencyPolicy? {
            switch self {
            case .depot, .depotUnpaced: nil
            case .fifo, .fixedPriorities: .fixed(6)
            case .fixedPriorities2: .fixed(2)
            }
        }

        var prioritised: Bool { self != .fifo }

        /// The name `DEPOT_REALLINK_ONLY` selects it by.
        var key: String {
            switch self {
            case .depot: "depot"
            case .depotUnpaced: "unpaced"
            case .fifo: "fifo"
            case .fixedPriorities: "fixed6"
            case .fixedPriorities2: "fixed2"
            }
        }
    }

    struct Sample {
        var high: Double
        var total: Double
    }

    static let rates: [(name: String, tc: String, bitsPerSecond: Double)] = [
        ("1 Mbit/s", "1mbit", 1_000_000),
        ("256 kbit/s", "256kbit", 256_000),
    ]
    static let lowBytes = 20_000
    static let highBytes = 40_000

    /// The entry point: outside the namespace it makes one and runs itself again inside.
    static func run(arguments: [String]) async throws {
        let repeats = arguments.count > 1 ? Int(arguments[1]) ?? 3 : 3
        let lows = arguments.count > 2 ? Int(arguments[2]) ?? 100 : 100
        let server = arguments.count > 3 ? arguments[3] : ".build/debug/depot-server"
        if ProcessInfo.processInfo.environment[insideVariable] != nil {
            try await inside(repeats: repeats, lows: lows, server: server)
            return
        }
        _ = try shell("/usr/sbin/ip", ["netns", "delete", namespace], mayFail: true)
        try shell("/usr/sbin/ip", ["netns", "add", namespace])
        defer { _ = try? shell("/usr/sbin/ip", ["netns", "delete", namespace]) }
        // With loopback's 64 KB MTU, tbf drops every packet larger than its burst.
        try shell("/usr/sbin/ip", ["netns", "exec", namespace, "ip", "link", "set", "lo", "mtu", "1500", "up"])
        // Loopback also hands tbf segmentation-offload packets of up to 64 KB,
        // each sent whole once the bucket holds its tokens: a link whose first
        // byte comes only after ~8 KB (60 ms at 1 Mbit/s, by curl). A real
        // bottleneck carries wire-size packets: one segment per packet
        // (DEPOT_REALLINK_GSO=1 keeps loopback's offload, as before 2026-11-26).
        if ProcessInfo.processInfo.environment["DEPOT_REALLINK_GSO"] == nil {
            try shell("/usr/sbin/ip", ["netns", "exec", namespace, "ip", "link", "set", "dev", "lo", "gso_max_size", "1500", "gso_max_segs", "1"])
        }
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        // The arguments as given, so that the summary rows show the command as run.
        try shell("/usr/sbin/ip", ["netns", "exec", namespace, "env", "\(insideVariable)=1", me] + CommandLine.arguments.dropFirst(), inheritOutput: true)
    }

    static func inside(repeats: Int, lows: Int, server: String) async throws {
        let depotServer = try DepotServerProcess.start(server, arguments: ["--port", "0"])
        defer { depotServer.stop() }
        let base = URL(string: depotServer.base)!
        say("reallink: \(lows) × \(lowBytes / 1000) KB low priority, then 1 × \(highBytes / 1000) KB high priority after 2 s; depot-server \(server) at \(base), namespace \(namespace), tbf burst 32kb latency 500ms; \(repeats) repetitions")
        say(loadLine())
        // DEPOT_REALLINK_ONLY="depot|unpaced|fifo|fixed6|fixed2" and DEPOT_REALLINK_RATES="256kbit" select rows.
        let only = ProcessInfo.processInfo.environment["DEPOT_REALLINK_ONLY"].map { $0.split(separator: "|").map(String.init) }
        let setups = Setup.allCases.filter { only?.contains($0.key) ?? true }
        let rateNames = ProcessInfo.processInfo.environment["DEPOT_REALLINK_RATES"].map { $0.split(separator: "|").map(String.init) }
        var measured: [Measured] = []
        for rate in rates where rateNames?.contains(rate.tc) ?? true {
            try shell("tc", ["qdisc", "replace", "dev", "lo", "root", "tbf", "rate", rate.tc, "burst", "32kb", "latency", "500ms"])
            let minimum = Double(highBytes) * 8 / rate.bitsPerSecond
            var real: [Setup: [Sample]] = [:]
            for round in 0..<repeats {
                for setup in setups {
                    let sample = try await realRun(base: base, setup: setup, lows: lows)
                    real[setup, default: []].append(sample)
                    say(String(format: "  %@ round %d %-22@ high %.3f s (%.2fx)  total %.2f s", rate.name, round + 1, setup.description, sample.high, sample.high / minimum, sample.total))
                }
            }
            // tbf queues up to rate × latency + burst bytes.
            let queue = Int(rate.bitsPerSecond / 8 * 0.5) + 32 * 1024
            var simulated: [Setup: Sample] = [:]
            var fairShare: [Setup: Sample] = [:]
            for setup in Setup.allCases {
                simulated[setup] = try await simulatedRun(bitsPerSecond: rate.bitsPerSecond, queue: queue, setup: setup, lows: lows)
                fairShare[setup] = try await simulatedRun(bitsPerSecond: rate.bitsPerSecond, queue: nil, setup: setup, lows: lows)
            }
            say("\n\(rate.name): physical minimum of the high-priority transfer \(String(format: "%.3f", minimum)) s")
            say("setup                    high, real: median (min–max)      ×min   total, real: median (min–max)   vs FIFO   | simulated, \(queue) B queue: high, total | no queue: high, total")
            let fifoTotal = real[.fifo].map { median($0.map(\.total)) } ?? .nan
            for setup in setups {
                let samples = real[setup]!
                let high = samples.map(\.high), total = samples.map(\.total)
                let sim = simulated[setup]!, fair = fairShare[setup]!
                say(String(format: "%-24@ %6.3f s (%.3f–%.3f)   %5.2fx   %6.2f s (%.2f–%.2f)   %+6.1f%%   | %6.3f s (%.2fx) %6.2f s | %6.3f s (%.2fx) %6.2f s",
                           setup.description, median(high), high.min()!, high.max()!, median(high) / minimum,
                           median(total), total.min()!, total.max()!, (median(total) / fifoTotal - 1) * 100,
                           sim.high, sim.high / minimum, sim.total, fair.high, fair.high / minimum, fair.total))
            }
            measured.append(Measured(rate: rate.name, minimum: minimum, real: real, simulated: simulated))
        }
        try shell("tc", ["qdisc", "delete", "dev", "lo", "root"], mayFail: true)
        say(loadLine())
        SummaryRow.print(summary(measured, lows: lows))
    }

    /// One rate's runs: the real ones by setup, and the simulated ones with tbf's queue.
    struct Measured {
        var rate: String
        var minimum: Double
        var real: [Setup: [Sample]]
        var simulated: [Setup: Sample]

        /// The median high-priority time of `setup` on the real link over the physical minimum.
        func high(_ setup: Setup) -> Double? {
            real[setup].map { RealLinkBench.median($0.map(\.high)) / minimum }
        }

        func total(_ setup: Setup) -> Double? {
            real[setup].map { RealLinkBench.median($0.map(\.total)) }
        }
    }

    /// BENCHMARKS.md's rows, for the rates and setups this run measured.
    /// With loopback's offload kept (`DEPOT_REALLINK_GSO=1`) only its own row.
    static func summary(_ measured: [Measured], lows: Int) -> [SummaryRow] {
        /// "a / b; c / d": `value` for each setup, rates apart; nil when one is missing.
        func perRate(_ setups: [Setup], _ value: (Measured, Setup) -> Double?) -> String? {
            let texts = measured.map { rate in setups.map { value(rate, $0).map(SummaryRow.times) } }
            guard !texts.isEmpty, texts.allSatisfy({ $0.allSatisfy { $0 != nil } }) else { return nil }
            return texts.map { $0.map { $0! }.joined(separator: " / ") }.joined(separator: "; ")
        }
        let rateList = measured.map(\.rate).joined(separator: "; ")
        if ProcessInfo.processInfo.environment["DEPOT_REALLINK_GSO"] != nil {
            return perRate([.depot, .depotUnpaced]) { $0.high($1) }.map { [SummaryRow("reallink with loopback offload kept, Depot / pacing off, \(rateList)", $0)] } ?? []
        }
        var rows: [SummaryRow] = []
        for (index, rate) in measured.enumerated() {
            guard let samples = rate.real[.depot], let high = rate.high(.depot) else { continue }
            let name = index == 0 && rate.rate == Self.rates[0].name
                ? "reallink: high-priority \(highBytes / 1000) KB behind \(lows) low \(lowBytes / 1000) KB, `tbf` \(rate.rate), vs \(String(format: "%.3f", rate.minimum)) s minimum"
                : "reallink: the same at \(rate.rate), vs \(String(format: "%.3f", rate.minimum)) s minimum"
            rows.append(SummaryRow(name, target: "≤ 1.5×", "\(SummaryRow.times(high)) (\(SummaryRow.range(samples.map(\.high), digits: 3)) s)", met: high <= 1.5))
        }
        let totals = measured.compactMap { rate in rate.total(.depot).flatMap { depot in rate.total(.fifo).map { (depot, $0) } } }
        if !totals.isEmpty, totals.count == measured.count {
            let changes = totals.map { ($0.0 / $0.1 - 1) * 100 }
            rows.append(SummaryRow("reallink: all \(lows + 1) transfers vs FIFO (fixed 6), \(measured.map(\.rate).joined(separator: " / "))", target: "within 5%",
                                   "\(changes.map { SummaryRow.percent($0) }.joined(separator: " / ")) (\(totals.map { String(format: "%.2f", $0.0) }.joined(separator: " / ")) vs \(totals.map { String(format: "%.2f", $0.1) }.joined(separator: " / ")) s)",
                                   met: changes.allSatisfy { $0 <= 5 }))
        }
        for rate in measured {
            let others: [Setup] = [.depotUnpaced, .fixedPriorities, .fixedPriorities2, .fifo]
            let values = others.compactMap { rate.high($0) }
            guard values.count == others.count else { continue }
            rows.append(SummaryRow("reallink \(rate.rate): pacing off / fixed 6 prio / fixed 2 prio / FIFO", values.map(SummaryRow.times).joined(separator: " / ")))
        }
        if let simulated = perRate([.depot, .depotUnpaced], { rate, setup in rate.simulated[setup].map { $0.high / rate.minimum } }) {
            rows.append(SummaryRow("reallink on `NetworkSimulator` with tbf's queue, Depot / pacing off, \(rateList)", simulated))
        }
        return rows
    }

    static func configure(_ configuration: inout NetworkController.Configuration, _ setup: Setup) {
        if let policy = setup.policy { configuration.limits.concurrency = policy }
        // Fixed limits show the scheduler's priorities alone, as before pacing existed.
        if setup != .depot { configuration.conditions.delayablePacing = .off }
        // DEPOT_REALLINK_PACING_RTTS=1 tries another budget in the Depot row.
        if setup == .depot, let text = ProcessInfo.processInfo.environment["DEPOT_REALLINK_PACING_RTTS"], let roundTrips = Double(text) {
            configuration.conditions.delayablePacing = .bandwidthDelay(roundTrips: roundTrips)
        }
    }

    static func realRun(base: URL, setup: Setup, lows: Int) async throws -> Sample {
        var configuration = NetworkController.Configuration(baseURL: base, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
        configure(&configuration, setup)
        // DEPOT_REALLINK_TRACE=1 prints every transfer that overlapped the high-priority one.
        let tracing = ProcessInfo.processInfo.environment["DEPOT_REALLINK_TRACE"] != nil
        let trace = TraceRecorder()
        if tracing { configuration.observability.trace = trace }
        let controller = NetworkController(configuration: configuration)
        let clock = ContinuousClock()
        let start = clock.now
        let failures = Locked(0)
        for i in 0..<lows {
            controller.enqueue(Get(path: "faults/bytes/\(lowBytes)?n=\(i)", priority: setup.prioritised ? .low : .normal, category: setup.prioritised ? .images : .default)) { result in
                if case .failure = result { failures.value += 1 }
            }
        }
        // The issue's scenario on a real link, so in real time: the urgent
        // transfer arrives while the low-priority ones are under way and the
        // bottleneck's queue is full, not while they are still being queued.
        try await Task.sleep(for: .seconds(2))
        let highStart = clock.now
        _ = try await controller.perform(Get(path: "faults/bytes/\(highBytes)", priority: setup.prioritised ? .high : .normal, category: .default))
        let high = (clock.now - highStart).seconds
        if tracing {
            say("    at the high's start: \(controller.quality), limit \(controller.concurrencyLimit), \(controller.connectionSnapshot)")
            let entries = trace.trace().entries
            // The monitor's minimum round trip is the shortest time to first byte it saw.
            let firstBytes = entries.compactMap { entry in entry.started.flatMap { started in entry.firstByte.map { ($0 - started).seconds } } }
            if let shortest = firstBytes.min(), let bandwidth = controller.connectionSnapshot.bandwidth {
                say(String(format: "    shortest time to first byte %.1f ms: pacing budget about %.0f bytes", shortest * 1000, bandwidth / 8 * shortest * DelayablePacing.defaultRoundTrips))
            }
            if let urgent = entries.first(where: { $0.priority == .high }), let end = urgent.finished {
                func ms(_ d: Duration?) -> String { d.map { String(format: "%.0f", $0.seconds * 1000) } ?? "-" }
                // The first three, which set the monitor's first estimates, and those around the urgent one.
                let firstIDs = Set(entries.prefix(3).map(\.id))
                for entry in entries where firstIDs.contains(entry.id) || (entry.finished ?? end) >= urgent.enqueued - .milliseconds(800) && (entry.started ?? end) <= end {
                    say("    \(entry.priority) \(entry.name) #\(entry.id): enqueued \(ms(entry.enqueued)) started \(ms(entry.started)) first byte \(ms(entry.firstByte)) finished \(ms(entry.finished))")
                }
            }
        }
        await controller.waitUntilIdle()
        let total = (clock.now - start).seconds
        await Task.yield()
        let failed = failures.value
        if failed > 0 { say("  \(failed) low-priority transfers failed") }
        _ = await controller.shutdown(grace: .seconds(5))
        return Sample(high: high, total: total)
    }

    /// The same scenario on `NetworkSimulator` with loopback's round trip.
    /// `queue`: the bottleneck's queue in bytes (`nil`: the simulator's fair sharing, no queue).
    static func simulatedRun(bitsPerSecond: Double, queue: Int?, setup: Setup, lows: Int) async throws -> Sample {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: bitsPerSecond, rtt: .milliseconds(1), queue: queue), routes: [
            // Strong ETags, as depot-server sends: both answer byte ranges.
            .init(path: "/low/*", bytes: lowBytes, headers: ["ETag": "\"low\""]), .init(path: "/high", bytes: highBytes, headers: ["ETag": "\"high\""]),
        ])
        var configuration = NetworkController.Configuration(baseURL: URL(string: "http://sim.test")!, transport: simulator, observability: .init(notificationCenter: nil), environment: .init(clock: clock))
        configure(&configuration, setup)
        let controller = NetworkController(configuration: configuration)
        let settled = simulator.settled(with: controller)
        let tickets = (0..<lows).map { controller.enqueue(Get(path: "low/\($0)", priority: setup.prioritised ? .low : .normal, category: setup.prioritised ? .images : .default)) }
        try await simulator.run(until: .seconds(2), settled: settled)
        let highStart = clock.elapsed
        let high = controller.enqueue(Get(path: "high", priority: setup.prioritised ? .high : .normal, category: .default))
        try await simulator.run(until: { high.isFinished }, settled: settled)
        let highTime = (clock.elapsed - highStart).seconds
        try await simulator.run(until: { tickets.allSatisfy(\.isFinished) }, settled: settled)
        let total = clock.elapsed.seconds
        _ = await controller.shutdown(grace: .zero)
        return Sample(high: highTime, total: total)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    static func loadLine() -> String {
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        return "load average: \(load)"
    }

    @discardableResult
    static func shell(_ executable: String, _ arguments: [String], mayFail: Bool = false, inheritOutput: Bool = false) throws -> Int32 {
        let process = Process()
        let path = executable.hasPrefix("/") ? executable : (["/usr/sbin/", "/sbin/", "/usr/bin/"].map { $0 + executable }.first { FileManager.default.isExecutableFile(atPath: $0) } ?? executable)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !inheritOutput { process.standardOutput = FileHandle.nullDevice }
        if mayFail { process.standardError = FileHandle.nullDevice }
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0, !mayFail {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)"])
        }
        return process.terminationStatus
    }
}
