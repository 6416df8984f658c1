import Depot
import Foundation

/// The controller's own cost per operation, with a transport that answers at
/// once from memory: no sockets, so only Depot's work is measured.
enum OverheadBench {
    struct InstantTransport: Transport {
        let body = Data(repeating: UInt8(ascii: "x"), count: 1024)
        func send(_ request: TransportRequest) async throws -> TransportResponse {
            TransportResponse(status: 200, headers: ["Content-Length": "1024"], body: ResponseBody(data: body))
        }
    }

    static func run(operations: Int) async throws {
        for concurrency in [1, 8] {
            var configuration = NetworkController.Configuration(
                baseURL: URL(string: "http://127.0.0.1:1")!,
                transport: InstantTransport(),
                concurrencyLimit: concurrency
            )
            if ProcessInfo.processInfo.environment["DEPOT_BENCH_NO_NOTIFICATIONS"] != nil { configuration.notificationCenter = nil }
            let controller = NetworkController(configuration: configuration)
            try await TransportBench.fanOut(1000, concurrency) { index in _ = try await controller.perform(TransportBench.GetItem(id: index)) }
            let cpuBefore = TransportBench.cpuSeconds(children: false)
            let start = ContinuousClock.now
            try await TransportBench.fanOut(operations, concurrency) { index in
                _ = try await controller.perform(TransportBench.GetItem(id: index))
            }
            let wall = (ContinuousClock.now - start).seconds
            let cpu = TransportBench.cpuSeconds(children: false) - cpuBefore
            print(String(format: "controller only, c=%d: %.1f µs wall and %.1f µs CPU per operation (%d operations)", concurrency, wall / Double(operations) * 1e6, cpu / Double(operations) * 1e6, operations))
            _ = await controller.shutdown(grace: .zero)
        }
    }
}
