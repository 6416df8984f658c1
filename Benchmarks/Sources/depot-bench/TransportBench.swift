import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import Foundation
import NIOCore
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// 5,000 small GETs (1 KB JSON) over loopback at concurrency 1 and 8: Depot's
/// controller on each transport against the same transport used raw, and curl.
enum TransportBench {
    struct Row {
        var name: String
        var concurrency: Int
        var wall: Double
        var cpu: Double
        var requests: Int
        var switches: Int = 0
        /// Against the raw client, round by round (a round's runs are seconds to
        /// tens of seconds apart, so a slow spell of the machine falls on both):
        /// the per-round changes in throughput and in CPU per request, in percent.
        var paired: (throughput: [Double], cpu: [Double]) = ([], [])

        var requestsPerSecond: Double { Double(requests) / wall }
        var cpuPerThousand: Double { cpu / Double(requests) * 1000 }
    }

    /// One GET of an item; the output is the body.
    struct GetItem: NetworkOperation {
        var id: Int
        var request: NetworkRequest { .get("/items/\(id)") }
        var coalescing: Coalescing { .never }
        func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int { response.body.count }
    }

    static func run(requests: Int, repeats: Int) async throws {
        let stealBefore = HostCPU.read()
        let server = try ServerProcess.start()
        defer { server.stop() }
        let base = URL(string: "http://127.0.0.1:\(server.port)")!
        print("server pid \(server.pid) on \(base), \(requests) requests per run, median of \(repeats) runs")
        _ = BusyWork.perMicrosecond  // calibrates
        let check = BusyWork.threadCPUMicroseconds()
        for _ in 0..<1000 { BusyWork.run(microseconds: 10) }
        print(String(format: "busy work: %.0f iterations per µs of thread CPU; \"10 µs of work\" measures %.1f µs\n", BusyWork.perMicrosecond, (BusyWork.threadCPUMicroseconds() - check) / 1000))

        var rows: [Row] = []
        for concurrency in [1, 8] where ProcessInfo.processInfo.environment["DEPOT_BENCH_C"].map({ Int($0) == concurrency }) ?? true {
            let scenarios: [(String, (Int) async throws -> Void)] = [
                ("URLSession raw", try urlSessionRaw(base: base, concurrency: concurrency)),
                ("Depot + URLSessionTransport", depot(base: base, transport: URLSessionTransport(), concurrency: concurrency)),
                ("URLSessionTransport alone", transportAlone(base: base, transport: URLSessionTransport(), concurrency: concurrency)),
                ("AsyncHTTPClient raw", try ahcRaw(base: base, concurrency: concurrency)),
                ("Depot + AsyncHTTPClientTransport", depot(base: base, transport: AsyncHTTPClientTransport(), concurrency: concurrency)),
                ("Depot + AsyncHTTPClientTransport, no notifications", depot(base: base, transport: AsyncHTTPClientTransport(), concurrency: concurrency, notifications: false)),
                ("AsyncHTTPClientTransport alone", transportAlone(base: base, transport: AsyncHTTPClientTransport(), concurrency: concurrency)),
                ("AsyncHTTPClient raw + task hop", try ahcRaw(base: base, concurrency: concurrency, hop: .globalTask)),
                ("AsyncHTTPClient raw + loop task hop", try ahcRaw(base: base, concurrency: concurrency, hop: .eventLoopTask)),
                ("AsyncHTTPClient raw + 10 µs of work", try ahcRaw(base: base, concurrency: concurrency, work: 10)),
                ("AsyncHTTPClient raw + 30 µs of work", try ahcRaw(base: base, concurrency: concurrency, work: 30)),
            ]
            let only = ProcessInfo.processInfo.environment["DEPOT_BENCH_ONLY"]
            let chosen = scenarios.filter { only == nil || only!.split(separator: "|").contains(Substring($0.0)) }
            for (_, body) in chosen { try await body(200) }  // warm up: connections, caches
            // Rounds, not blocks: every scenario runs once per round, so a slow
            // minute of this shared VM lands on all of them alike.
            var runs: [String: [Row]] = [:]
            for _ in 0..<repeats {
                for (name, body) in chosen {
                    runs[name, default: []].append(try await measure(name, concurrency, requests) { try await body(requests) })
                }
            }
            for (name, _) in chosen {
                let sorted = runs[name, default: []].sorted { $0.wall < $1.wall }
                var median = sorted[sorted.count / 2]
                if let rawName = rawName(for: name), rawName != name, let raw = runs[rawName] {
                    for (run, base) in zip(runs[name, default: []], raw) {
                        median.paired.throughput.append((run.requestsPerSecond / base.requestsPerSecond - 1) * 100)
                        median.paired.cpu.append((run.cpuPerThousand / base.cpuPerThousand - 1) * 100)
                    }
                }
                rows.append(median)
                report(median)
            }
            if only != nil { continue }
            var curlRuns: [Row] = []
            for _ in 0..<repeats { curlRuns.append(try curl(base: base, concurrency: concurrency, requests: requests)) }
            let median = curlRuns.sorted { $0.wall < $1.wall }[curlRuns.count / 2]
            rows.append(median)
            report(median)
        }
        print("\n" + table(rows))
        if let before = stealBefore, let after = HostCPU.read(), after.total > before.total {
            // Time the hypervisor gave to other guests while this VM wanted the CPU
            // (at 34-35% on 2026-11-22, raw AsyncHTTPClient ran at a third of its speed).
            let share = Double(after.steal - before.steal) / Double(after.total - before.total) * 100
            print(String(format: "\nsteal during the run: %.0f%% of this VM's CPU time (/proc/stat)", share))
        }
        SummaryRow.print(summary(rows))
    }

    static func report(_ row: Row) {
        print(String(format: "%-52@ c=%d  %8.0f req/s  %.3f CPU-s/1000  %.1f context switches/request", row.name as NSString, row.concurrency, row.requestsPerSecond, row.cpuPerThousand, Double(row.switches) / Double(row.requests)))
    }

    /// The raw client a row is compared with.
    static func rawName(for name: String) -> String? {
        name.contains("URLSession") ? "URLSession raw" : name.contains("AsyncHTTPClient") ? "AsyncHTTPClient raw" : nil
    }

    /// The median and the quartiles of `values`, as "m (q1 to q3)".
    static func spread(_ values: [Double]) -> String {
        String(format: "%+.1f%% (%+.1f to %+.1f)", quantile(values, 0.5), quantile(values, 0.25), quantile(values, 0.75))
    }

    /// The `q` quantile of `values`, interpolated between neighbours.
    static func quantile(_ values: [Double], _ q: Double) -> Double {
        let sorted = values.sorted()
        let position = q * Double(sorted.count - 1)
        let lower = Int(position.rounded(.down)), upper = Int(position.rounded(.up))
        return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - Double(lower))
    }

    /// BENCHMARKS.md's transport rows, from the clients this run measured.
    static func summary(_ rows: [Row]) -> [SummaryRow] {
        func row(_ name: String, _ concurrency: Int) -> Row? {
            rows.first { $0.name == name && $0.concurrency == concurrency }
        }
        /// Against the raw client, paired by round: the medians of the changes in CPU per request and requests/s.
        func overRaw(_ name: String, _ concurrency: Int) -> (cpu: Double, throughput: Double)? {
            guard let row = row(name, concurrency), !row.paired.cpu.isEmpty else { return nil }
            return (quantile(row.paired.cpu, 0.5), quantile(row.paired.throughput, 0.5))
        }
        func text(_ change: (cpu: Double, throughput: Double)) -> String {
            "\(SummaryRow.percent(change.cpu)) CPU, \(SummaryRow.percent(change.throughput)) req/s"
        }
        /// Both concurrencies, "c=8 / c=1", or nil when either was not run.
        func both(_ value: (Int) -> String?) -> String? {
            guard let eight = value(8), let one = value(1) else { return nil }
            return "\(eight) / \(one)"
        }
        var summary: [SummaryRow] = []
        for concurrency in [8, 1] {
            guard let change = overRaw("Depot + AsyncHTTPClientTransport", concurrency),
                  let depot = row("Depot + AsyncHTTPClientTransport", concurrency), let raw = row("AsyncHTTPClient raw", concurrency) else { continue }
            let added = (depot.cpuPerThousand - raw.cpuPerThousand) * 1000
            summary.append(SummaryRow(concurrency == 8 ? "transport: Depot + AsyncHTTPClientTransport vs raw AsyncHTTPClient, c=8" : "transport: the same, c=1",
                                      target: "≤ 10% over raw", "\(text(change)) (\(String(format: "%.0f", added)) µs CPU/request)",
                                      met: change.cpu <= 10 && change.throughput >= -10))
        }
        if let value = both({ overRaw("Depot + AsyncHTTPClientTransport, no notifications", $0).map(text) }) {
            summary.append(SummaryRow("transport: the same without notifications, c=8 / c=1", value))
        }
        if let change = overRaw("AsyncHTTPClientTransport alone", 8) {
            summary.append(SummaryRow("transport: AsyncHTTPClientTransport alone vs raw, c=8", text(change)))
        }
        if let value = both({ overRaw("Depot + URLSessionTransport", $0).map(text) }) {
            summary.append(SummaryRow("transport: Depot + URLSessionTransport vs raw URLSession, c=8 / c=1", value))
        }
        if let value = both({ overRaw("URLSessionTransport alone", $0).map { SummaryRow.percent($0.cpu) } }) {
            summary.append(SummaryRow("transport: URLSessionTransport alone vs raw URLSession, c=8 / c=1", value + " CPU"))
        }
        for concurrency in [8, 1] {
            guard let client = row("AsyncHTTPClient raw", concurrency), let session = row("URLSession raw", concurrency) else { continue }
            summary.append(SummaryRow("transport: raw AsyncHTTPClient vs raw URLSession, c=\(concurrency)",
                                      "\(SummaryRow.grouped(client.requestsPerSecond)) vs \(SummaryRow.grouped(session.requestsPerSecond)) req/s (\(String(format: "%.1f", client.requestsPerSecond / session.requestsPerSecond))×); "
                                      + "\(SummaryRow.grouped(client.cpuPerThousand * 1000)) vs \(SummaryRow.grouped(session.cpuPerThousand * 1000)) µs CPU/request"))
        }
        return summary
    }

    static func table(_ rows: [Row]) -> String {
        var lines = [
            "| client | concurrency | requests/s | client CPU-s per 1,000 | context switches per request | vs raw transport (throughput / CPU) | paired by round: throughput | paired by round: CPU |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for row in rows {
            var versus = "–"
            if let rawName = rawName(for: row.name), row.name != rawName, let raw = rows.first(where: { $0.name == rawName && $0.concurrency == row.concurrency }) {
                let throughput = (row.requestsPerSecond / raw.requestsPerSecond - 1) * 100
                let cpu = (row.cpuPerThousand / raw.cpuPerThousand - 1) * 100
                versus = String(format: "%+.1f%% / %+.1f%%", throughput, cpu)
            }
            let pairedThroughput = row.paired.throughput.isEmpty ? "–" : spread(row.paired.throughput)
            let pairedCPU = row.paired.cpu.isEmpty ? "–" : spread(row.paired.cpu)
            let switches = row.name.hasPrefix("curl") ? "–" : String(format: "%.1f", Double(row.switches) / Double(row.requests))
            lines.append(String(format: "| %@ | %d | %.0f | %.3f | %@ | %@ | %@ | %@ |", row.name as NSString, row.concurrency, row.requestsPerSecond, row.cpuPerThousand, switches as NSString, versus as NSString, pairedThroughput as NSString, pairedCPU as NSString))
        }
        return lines.joined(separator: "\n")
    }

    static func measure(_ name: String, _ concurrency: Int, _ requests: Int, _ body: () async throws -> Void) async throws -> Row {
        let cpuBefore = cpuSeconds(children: false)
        let switchesBefore = contextSwitches()
        let start = ContinuousClock.now
        try await body()
        let wall = ContinuousClock.now - start
        let cpu = cpuSeconds(children: false) - cpuBefore
        return Row(name: name, concurrency: concurrency, wall: wall.seconds, cpu: cpu, requests: requests, switches: contextSwitches() - switchesBefore)
    }

    /// Runs `count` jobs on `concurrency` workers, each taking the next index.
    static func fanOut(_ count: Int, _ concurrency: Int, _ job: @escaping @Sendable (Int) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var index = worker
                    while index < count {
                        try await job(index)
                        index += concurrency
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    static func depot(base: URL, transport: any Transport, concurrency: Int, notifications: Bool = true) -> (Int) async throws -> Void {
        var configuration = NetworkController.Configuration(baseURL: base, transport: transport, limits: .init(concurrency: .fixed(concurrency)))
        if !notifications { configuration.observability.notificationCenter = nil }
        let controller = NetworkController(configuration: configuration)
        return { count in
            try await fanOut(count, concurrency) { index in
                let bytes = try await controller.perform(GetItem(id: index))
                precondition(bytes > 1000)
            }
        }
    }

    static func urlSessionRaw(base: URL, concurrency: Int) throws -> (Int) async throws -> Void {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpMaximumConnectionsPerHost = 16
        let session = URLSession(configuration: configuration)
        return { count in
            try await fanOut(count, concurrency) { index in
                let url = base.appendingPathComponent("items/\(index)")
                let bytes: Int = try await withCheckedThrowingContinuation { continuation in
                    session.dataTask(with: url) { data, response, error in
                        if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: data?.count ?? 0) }
                    }.resume()
                }
                precondition(bytes > 1000)
            }
        }
    }

    /// The transport's own `send` and body, without the controller.
    static func transportAlone(base: URL, transport: any Transport, concurrency: Int) -> (Int) async throws -> Void {
        { count in
            try await fanOut(count, concurrency) { index in
                let head = try await transport.send(TransportRequest(url: base.appending(path: "items/\(index)")))
                var bytes = 0
                for try await chunk in head.body { bytes += chunk.count }
                precondition(bytes > 1000)
            }
        }
    }

    enum Hop { case none, globalTask, eventLoopTask }

    /// Runs a task's jobs on one event loop, so a response that arrives on that
    /// loop resumes the task without waking another thread.
    final class LoopExecutor: TaskExecutor {
        let loop: any EventLoop
        init(_ loop: any EventLoop) { self.loop = loop }
        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    /// `hop` adds the shape of Depot's job: the request runs in a task of its
    /// own and the caller waits for its value (one more wake-up per request).
    /// `work` adds that many microseconds of pure computation (this thread's CPU,
    /// see ``BusyWork``), half before the request and half after: the price of
    /// any client-side work per request on the network, event loops included
    /// (Benchmarks/NOTES.md, "transport").
    static func ahcRaw(base: URL, concurrency: Int, hop: Hop = .none, work: Double = 0) throws -> (Int) async throws -> Void {
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let executors = (0..<concurrency).map { _ in LoopExecutor(HTTPClient.defaultEventLoopGroup.next()) }
        @Sendable func get(_ index: Int) async throws -> Int {
            let response = try await client.execute(HTTPClientRequest(url: base.absoluteString + "/items/\(index)"), deadline: .distantFuture)
            return try await response.body.collect(upTo: 1 << 20).readableBytes
        }
        return { count in
            try await fanOut(count, concurrency) { index in
                if work > 0 { BusyWork.run(microseconds: work / 2) }
                defer { if work > 0 { BusyWork.run(microseconds: work / 2) } }
                let bytes: Int
                switch hop {
                case .none: bytes = try await get(index)
                case .globalTask: bytes = try await Task { try await get(index) }.value
                case .eventLoopTask: bytes = try await Task(executorPreference: executors[index % concurrency]) { try await get(index) }.value
                }
                precondition(bytes > 1000)
            }
        }
    }

    static func curl(base: URL, concurrency: Int, requests: Int) throws -> Row {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("depot-bench-curl-\(concurrency).txt")
        var text = ""
        for index in 0..<requests {
            text += "url = \"\(base.absoluteString)/items/\(index)\"\noutput = \"/dev/null\"\n"
        }
        try text.write(to: config, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["--silent", "--fail", "--parallel", "--parallel-max", "\(concurrency)", "--config", config.path]
        let cpuBefore = cpuSeconds(children: true)
        let start = ContinuousClock.now
        try process.run()
        process.waitUntilExit()
        let wall = ContinuousClock.now - start
        precondition(process.terminationStatus == 0, "curl failed")
        return Row(name: "curl --parallel", concurrency: concurrency, wall: wall.seconds, cpu: cpuSeconds(children: true) - cpuBefore, requests: requests)
    }

    /// Voluntary and involuntary context switches of this process so far (all threads).
    static func contextSwitches() -> Int {
        let usage = resourceUsage(children: false)
        return usage.ru_nvcsw + usage.ru_nivcsw
    }

    static func resourceUsage(children: Bool) -> rusage {
        var usage = rusage()
        #if os(Linux)
        getrusage(__rusage_who_t(children ? RUSAGE_CHILDREN.rawValue : RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(children ? RUSAGE_CHILDREN : RUSAGE_SELF, &usage)
        #endif
        return usage
    }

    static func cpuSeconds(children: Bool) -> Double {
        let usage = resourceUsage(children: children)
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }
}

extension Duration {
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}

/// A fixed amount of computation, calibrated once against this thread's CPU
/// clock: the same number of instructions whatever the neighbours do (unlike
/// a spin on the wall clock, which a preempted thread ends early).
enum BusyWork {
    /// Iterations of ``spin(_:)`` per microsecond of thread CPU.
    static let perMicrosecond: Double = {
        // A count the optimizer cannot treat as a constant.
        let iterations = ProcessInfo.processInfo.processIdentifier > 0 ? 2_000_000 : 1
        var best = Double.infinity
        for _ in 0..<7 {
            let before = threadCPUMicroseconds()
            spin(iterations)
            best = min(best, threadCPUMicroseconds() - before)
        }
        return Double(iterations) / best
    }()

    /// Where results go, so the loop cannot be removed.
    static let sink = Atomic<UInt64>(0)

    static func run(microseconds: Double) {
        spin(Int(perMicrosecond * microseconds))
    }

    /// A xorshift sequence: no closed form for the optimizer to find.
    @inline(never)
    static func spin(_ iterations: Int) {
        var x: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(iterations)
        for _ in 0..<iterations {
            x ^= x << 13
            x ^= x >> 7
            x ^= x << 17
        }
        sink.store(x, ordering: .relaxed)
    }

    static func threadCPUMicroseconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) * 1e6 + Double(time.tv_nsec) / 1e3
    }
}

/// The bench server as a child process (this same binary, `serve`).
struct ServerProcess {
    let process: Process
    let port: Int
    var pid: Int32 { process.processIdentifier }

    /// Starts `depot-bench serve` (or other `arguments` of it) and reads the port it prints.
    static func start(arguments: [String] = ["serve"]) throws -> ServerProcess {
        let (process, line) = try ChildProcess.launch(CommandLine.arguments[0], arguments)
        guard let port = line.split(separator: " ").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else {
            process.terminate()
            throw CocoaError(.featureUnsupported)
        }
        return ServerProcess(process: process, port: port)
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}

/// depot-server as a child process, at the base URL it prints first.
struct DepotServerProcess {
    let process: Process
    /// `http://127.0.0.1:PORT`, as the server printed it.
    let base: String

    static func start(_ server: String, arguments: [String]) throws -> DepotServerProcess {
        let (process, line) = try ChildProcess.launch(server, arguments)
        guard let range = line.range(of: "http://") else {
            process.terminate()
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "depot-server did not start"])
        }
        return DepotServerProcess(process: process, base: String(line[range.lowerBound...].prefix { !$0.isWhitespace }))
    }

    func stop() {
        process.terminate()
    }
}

/// A child process whose first line of output says where it listens.
enum ChildProcess {
    /// Runs `executable` with `arguments` and returns it with the first line it printed.
    static func launch(_ executable: String, _ arguments: [String]) throws -> (Process, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        var buffer = Data()
        while !buffer.contains(UInt8(ascii: "\n")) {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
        }
        return (process, String(decoding: buffer, as: UTF8.self))
    }
}

/// The machine's CPU time so far, from the first line of /proc/stat (Linux), in clock ticks.
struct HostCPU {
    var total: Int
    var steal: Int

    static func read() -> HostCPU? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return nil }
        // user nice system idle iowait irq softirq steal (guest time is already in user).
        let fields = line.split(separator: " ").dropFirst().prefix(8).compactMap { Int($0) }
        guard fields.count == 8 else { return nil }
        return HostCPU(total: fields.reduce(0, +), steal: fields[7])
    }
}
