import Depot
import DepotTesting
import Foundation

// Sources/Depot/Depot.docc/OfflineAndBadNetworks.md (SearchContacts is in GettingStarted.swift).

enum OfflineBehaviorExamples {
    @MainActor final class Banner { var text = "" }

    @MainActor static func connection(controller: NetworkController, banner: Banner) {
        let connection = ConnectionStatus(controller: controller)
        if connection.quality == .offline {
            banner.text = "Offline — showing saved data"
        }
    }

    static func trace(api: URL, url: URL) throws {
        let recorder = TraceRecorder()
        let controller = NetworkController(configuration: .init(baseURL: api, observability: .init(trace: recorder)))
        // Run the app's work, then:
        try recorder.svg().write(to: url, atomically: true, encoding: .utf8)
        _ = controller
    }

    static func simulate() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 20_000_000, rtt: .milliseconds(50)),
                                         routes: [.init(path: "/image/*", bytes: 30_000)],
                                         timeline: [.bandwidth(100_000, at: .seconds(5))])
        let controller = NetworkController(configuration: .init(transport: simulator, environment: .init(clock: clock)))
        // enqueue work, then:
        try await simulator.run(until: { controller.quality == .poor }, settled: simulator.settled(with: controller))
    }
}
