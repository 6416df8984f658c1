import AsyncHTTPClient
import Depot
import DepotAsyncHTTPClient
import Foundation
import MallocInterposerSwift

/// Allocations per operation: a count that, unlike time on a shared VM, does
/// not depend on what the machine's neighbours do. Counted by the
/// malloc-interposer library, which this binary loads with `LD_PRELOAD` by
/// starting itself again.
enum AllocationBench {
    static let library = "libMallocInterposerSwift.so"

    static func run(operations: Int) async throws {
        guard isPreloaded else { return try relaunchWithInterposer() }
        print("allocations per operation (malloc calls in this process, all threads), \(operations) operations after a warm-up\n")

        var controllerOnly: [Double] = []  // with notifications, then without
        for notifications in [true, false] {
            var configuration = NetworkController.Configuration(
                baseURL: URL(string: "http://127.0.0.1:1")!,
                transport: OverheadBench.InstantTransport(),
                limits: .init(concurrency: .fixed(1))
            )
            if !notifications { configuration.observability.notificationCenter = nil }
            let controller = NetworkController(configuration: configuration)
            let count = try await count(operations) { index in
                _ = try await controller.perform(TransportBench.GetItem(id: index))
            }
            report(notifications ? "controller only (in memory)" : "controller only (in memory), no notifications", count)
            controllerOnly.append(count)
        }
        // What each interceptor costs per request: in memory, no notifications,
        // against the plain controller above.
        let memoryBase = URL(string: "http://127.0.0.1:1")!
        let authenticator = TokenAuthenticator(for: memoryBase, refresher: TokenRefresher { credential, _ in credential })
        await authenticator.signIn(TokenCredential(accessToken: "bench-token", refreshToken: "r"))
        let variants: [(String, (inout NetworkController.Configuration) -> Void)] = [
            ("+ one pass-through interceptor", { $0.interceptors = [PassThrough()] }),
            ("+ TokenAuthenticator (adds the bearer token)", { $0.authenticator = authenticator }),
            ("+ both", { $0.interceptors = [PassThrough()]; $0.authenticator = authenticator }),
        ]
        var added: [Double] = []
        for (label, configure) in variants {
            var configuration = NetworkController.Configuration(baseURL: memoryBase, transport: OverheadBench.InstantTransport(), limits: .init(concurrency: .fixed(1)), observability: .init(notificationCenter: nil))
            configure(&configuration)
            let controller = NetworkController(configuration: configuration)
            let count = try await count(operations) { index in
                _ = try await controller.perform(TransportBench.GetItem(id: index))
            }
            report("controller only, no notifications, \(label)", count)
            added.append(count - controllerOnly[1])
        }

        let server = try ServerProcess.start()
        defer { server.stop() }
        let base = URL(string: "http://127.0.0.1:\(server.port)")!
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
        let raw = try await count(operations) { index in
            let response = try await client.execute(HTTPClientRequest(url: base.absoluteString + "/items/\(index)"), deadline: .distantFuture)
            let bytes = try await response.body.collect(upTo: 1 << 20).readableBytes
            precondition(bytes > 1000)
        }
        report("AsyncHTTPClient raw (loopback)", raw)
        try await client.shutdown()
        let transport = AsyncHTTPClientTransport()
        let alone = try await count(operations) { index in
            let head = try await transport.send(TransportRequest(url: base.appending(path: "items/\(index)")))
            var bytes = 0
            for try await chunk in head.body { bytes += chunk.count }
            precondition(bytes > 1000)
        }
        report("AsyncHTTPClientTransport alone (loopback)", alone, versus: raw)
        var depotOverRaw: [Double] = []  // with notifications, then without
        for notifications in [true, false] {
            var configuration = NetworkController.Configuration(baseURL: base, transport: AsyncHTTPClientTransport(), limits: .init(concurrency: .fixed(1)))
            if !notifications { configuration.observability.notificationCenter = nil }
            let controller = NetworkController(configuration: configuration)
            let depot = try await count(operations) { index in
                let bytes = try await controller.perform(TransportBench.GetItem(id: index))
                precondition(bytes > 1000)
            }
            report(notifications ? "Depot + AsyncHTTPClientTransport (loopback)" : "Depot + AsyncHTTPClientTransport, no notifications (loopback)", depot, versus: raw)
            depotOverRaw.append(depot - raw)
            _ = await controller.shutdown(grace: .seconds(1))
        }
        await transport.shutdown()

        SummaryRow.print([
            SummaryRow("allocations: controller only, in memory", String(format: "%.1f mallocs/operation; %.1f without notifications", controllerOnly[0], controllerOnly[1])),
            SummaryRow("allocations: + pass-through `ResponseInterceptor` / + `TokenAuthenticator` / both (no notifications)", added.map { SummaryRow.signed($0) }.joined(separator: " / ")),
            SummaryRow("allocations: Depot + AsyncHTTPClientTransport over raw, loopback",
                       "\(SummaryRow.signed(depotOverRaw[0])) on raw's \(String(format: "%.1f", raw)); \(SummaryRow.signed(depotOverRaw[1])) without notifications"),
            SummaryRow("allocations: AsyncHTTPClientTransport alone over raw, loopback", SummaryRow.signed(alone - raw)),
        ])
    }

    /// An interceptor that passes every attempt on: the cost of asking one.
    struct PassThrough: ResponseInterceptor {
        func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision { .proceed }
    }

    /// Runs `body` for a warm-up, then counts the allocations of `operations` sequential runs.
    static func count(_ operations: Int, _ body: (Int) async throws -> Void) async throws -> Double {
        for index in 0..<min(1000, operations) { try await body(index) }
        MallocInterposerSwift.reset()
        MallocInterposerSwift.hook()
        for index in 0..<operations { try await body(index) }
        MallocInterposerSwift.unhook()
        return Double(MallocInterposerSwift.getStatistics().mallocCount) / Double(operations)
    }

    static func report(_ label: String, _ count: Double, versus raw: Double? = nil) {
        let added = raw.map { String(format: "  (%+.1f over raw)", count - $0) } ?? ""
        print(label.padding(toLength: 86, withPad: " ", startingAt: 0) + String(format: "%6.1f", count) + added)
    }

    static var isPreloaded: Bool {
        ProcessInfo.processInfo.environment["LD_PRELOAD"]?.contains(library) ?? false
    }

    /// Starts this binary again with the interposer preloaded, and exits with its status.
    static func relaunchWithInterposer() throws {
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let interposer = executable.deletingLastPathComponent().appendingPathComponent(library)
        guard FileManager.default.fileExists(atPath: interposer.path) else {
            print("allocations: \(interposer.path) not found (build the Benchmarks package first; Linux only)")
            exit(2)
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = Array(CommandLine.arguments.dropFirst())
        var environment = ProcessInfo.processInfo.environment
        environment["LD_PRELOAD"] = [environment["LD_PRELOAD"], interposer.path].compactMap { $0 }.joined(separator: ":")
        process.environment = environment
        try process.run()
        process.waitUntilExit()
        exit(process.terminationStatus)
    }
}
