import Depot
import Foundation
import Synchronization

/// The controller's own cost per operation, with a transport that answers at
/// once from memory: no sockets, so only Depot's work is measured.
enum OverheadBench {
    struct InstantTransport: Transport {
        let body = Data(repeating: UInt8(ascii: "x"), count: 1024)
        func send(_ request: TransportRequest) async throws -> TransportResponse {
            TransportResponse(status: 200, headers: ["Content-Length": "1024"], body: TransportBody(data: body))
        }
    }

    /// Answers from memory too, but only after the calling task suspended and
    /// was resumed from another thread, as a network client resumes it.
    struct SuspendingTransport: Transport {
        let body = Data(repeating: UInt8(ascii: "x"), count: 1024)
        let queue = DispatchQueue(label: "depot-bench.suspending")
        func send(_ request: TransportRequest) async throws -> TransportResponse {
            let response = TransportResponse(status: 200, headers: ["Content-Length": "1024"], body: TransportBody(data: body))
            return await withCheckedContinuation { continuation in queue.async { continuation.resume(returning: response) } }
        }
    }

    /// With `DEPOT_BENCH_COLD=1`, every operation starts after its thread read
    /// 4 MB (four times the per-core L2 of the VM it was written on): Depot's
    /// code and data then come from L3. Meant to approximate the network, where
    /// event loops, the kernel and the server run between two requests.
    enum ColdCaches {
        static let isOn = ProcessInfo.processInfo.environment["DEPOT_BENCH_COLD"] == "1"
        static let size = 4 << 20
        static let buffer = [UInt8](repeating: 1, count: size)

        /// Reads one byte of every 64-byte cache line.
        static func evictIfOn() {
            guard isOn else { return }
            let sum = buffer.withUnsafeBufferPointer { bytes in
                stride(from: 0, to: size, by: 64).reduce(UInt64(0)) { $0 &+ UInt64(bytes[$1]) }
            }
            BusyWork.sink.store(sum, ordering: .relaxed)
        }
    }

    static func run(operations: Int) async throws {
        if ColdCaches.isOn {
            _ = ColdCaches.buffer.count  // made (and its pages faulted in) before any timing
            print("cold caches: every operation first reads \(ColdCaches.size >> 20) MB")
        }
        let instant = try await run(operations: operations, transport: InstantTransport(), label: "controller only")
        let suspending = try await run(operations: operations, transport: SuspendingTransport(), label: "controller, suspending transport")
        let alone = try await runAlone(operations: operations, label: "suspending transport alone", inTaskOfItsOwn: false)
        _ = try await runAlone(operations: operations, label: "suspending transport alone, in a task of its own", inTaskOfItsOwn: true)

        func cpu(_ microseconds: Double) -> String { String(format: "%.1f µs CPU/operation", microseconds) }
        var rows: [SummaryRow] = []
        for concurrency in [1, 8] {
            if let value = instant[concurrency] { rows.append(SummaryRow("overhead: controller only, in memory, c=\(concurrency)", cpu(value))) }
        }
        if let value = suspending[8] { rows.append(SummaryRow("overhead: controller, suspending transport, c=8", cpu(value))) }
        if let controller = suspending[8], let transport = alone[8] {
            rows.append(SummaryRow("overhead: controller's share, suspending transport, c=8, \(ColdCaches.isOn ? "cold" : "hot") caches", cpu(controller - transport)))
        }
        SummaryRow.print(rows)
    }

    /// The suspending transport without the controller; `inTaskOfItsOwn` runs each
    /// transfer in a task whose value the caller awaits, the shape of a Depot job.
    /// Returns CPU µs per operation by concurrency.
    static func runAlone(operations: Int, label: String, inTaskOfItsOwn: Bool) async throws -> [Int: Double] {
        if let only = ProcessInfo.processInfo.environment["DEPOT_BENCH_ONLY"], only != label { return [:] }
        var measured: [Int: Double] = [:]
        for concurrency in [1, 8] where ProcessInfo.processInfo.environment["DEPOT_BENCH_C"].map({ Int($0) == concurrency }) ?? true {
            let transport = SuspendingTransport()
            let transfer: @Sendable (Int) async throws -> Void = { index in
                let head = try await transport.send(TransportRequest(url: URL(string: "http://127.0.0.1:1/items/\(index)")!))
                var bytes = 0
                for try await chunk in head.body { bytes += chunk.count }
                precondition(bytes == 1024)
            }
            let cpuBefore = TransportBench.cpuSeconds(children: false)
            let switchesBefore = TransportBench.contextSwitches()
            let start = ContinuousClock.now
            try await TransportBench.fanOut(operations, concurrency) { index in
                ColdCaches.evictIfOn()
                if inTaskOfItsOwn {
                    try await Task { try await transfer(index) }.value
                } else {
                    try await transfer(index)
                }
            }
            let wall = (ContinuousClock.now - start).seconds
            let cpu = TransportBench.cpuSeconds(children: false) - cpuBefore
            let switches = Double(TransportBench.contextSwitches() - switchesBefore) / Double(operations)
            print(String(format: "\(label), c=%d: %.1f µs wall and %.1f µs CPU per operation, %.2f context switches (%d operations)", concurrency, wall / Double(operations) * 1e6, cpu / Double(operations) * 1e6, switches, operations))
            measured[concurrency] = cpu / Double(operations) * 1e6
        }
        return measured
    }

    /// The controller on `transport`; returns CPU µs per operation by concurrency.
    static func run(operations: Int, transport: any Transport, label: String) async throws -> [Int: Double] {
        if let only = ProcessInfo.processInfo.environment["DEPOT_BENCH_ONLY"], only != label { return [:] }
        var measured: [Int: Double] = [:]
        for concurrency in [1, 8] where ProcessInfo.processInfo.environment["DEPOT_BENCH_C"].map({ Int($0) == concurrency }) ?? true {
            var configuration = NetworkController.Configuration(
                baseURL: URL(string: "http://127.0.0.1:1")!,
                transport: transport,
                limits: .init(concurrency: .fixed(concurrency))
            )
            if ProcessInfo.processInfo.environment["DEPOT_BENCH_NO_NOTIFICATIONS"] == "1" { configuration.observability.notificationCenter = nil }
            let controller = NetworkController(configuration: configuration)
            try await TransportBench.fanOut(1000, concurrency) { index in _ = try await controller.perform(TransportBench.GetItem(id: index)) }
            let cpuBefore = TransportBench.cpuSeconds(children: false)
            let switchesBefore = TransportBench.contextSwitches()
            let start = ContinuousClock.now
            try await TransportBench.fanOut(operations, concurrency) { index in
                ColdCaches.evictIfOn()
                _ = try await controller.perform(TransportBench.GetItem(id: index))
            }
            let switches = Double(TransportBench.contextSwitches() - switchesBefore) / Double(operations)
            let wall = (ContinuousClock.now - start).seconds
            let cpu = TransportBench.cpuSeconds(children: false) - cpuBefore
            print(String(format: "\(label), c=%d: %.1f µs wall and %.1f µs CPU per operation, %.2f context switches (%d operations)", concurrency, wall / Double(operations) * 1e6, cpu / Double(operations) * 1e6, switches, operations))
            measured[concurrency] = cpu / Double(operations) * 1e6
            _ = await controller.shutdown(grace: .zero)
        }
        return measured
    }
}
