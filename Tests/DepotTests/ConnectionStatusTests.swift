import Depot
import DepotTesting
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1)))
@MainActor
struct ConnectionStatusTests {
    struct Ping: NetworkOperation {
        typealias Output = NetworkResponse
        var offlineBehavior: OfflineBehavior = .failFast
        var category: OperationCategory = .default
        var request: NetworkRequest { .get("ping") }
    }

    @Test func followsTheControllerOfflineAndBack() async throws {
        // Given a controller on a transport that refuses connections
        let clock = ManualClock()
        let transport = FixtureTransport(["/ping": .data(Data("pong".utf8))])
        transport.isOffline = true
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://fixtures.test")!, transport: transport, observability: .init(notificationCenter: nil), environment: .init(clock: clock)))
        let status = ConnectionStatus(controller: controller)
        #expect(status.quality == .good)
        #expect(status.concurrencyLimit == 4)

        // When a request finds no network
        let error = await #expect(throws: DepotError.self) { try await controller.perform(Ping()) }
        #expect(error?.code == .offline)

        // Then the status says offline, with nothing allowed to run
        try await observed { status.quality == .offline }
        #expect(controller.quality == .offline)
        try await observed { status.concurrencyLimit == 0 }

        // When the network is back and a waiting GET gets through on the next probe
        transport.isOffline = false
        let events = Recorder(controller.events())
        let waiting = controller.enqueue(Ping(offlineBehavior: .waitForConnectivity))
        await clock.sleepers(atLeast: 1)
        clock.advance(by: NetworkController.Configuration().conditions.probeBackoff.lowerBound)
        _ = try await events.next { $0.ticket == waiting.id && $0.kind.isTerminal }

        // Then the status is back to the quality it had
        try await observed { status.quality != .offline }
        #expect(status.quality == .good)
        #expect(status.concurrencyLimit == 4)
        _ = await controller.shutdown(grace: .zero)
    }

    /// An app whose operations all fail fast queues nothing for the probes to
    /// let through: each such operation, sent when nothing else is out, is the probe.
    @Test func failFastOperationsFindTheNetworkBackOnTheirOwn() async throws {
        let clock = ManualClock()
        let transport = FixtureTransport(["/ping": .data(Data("pong".utf8))])
        transport.isOffline = true
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://fixtures.test")!, transport: transport, observability: .init(notificationCenter: nil), environment: .init(clock: clock)))

        // Given the controller found no network
        let first = await #expect(throws: DepotError.self) { try await controller.perform(Ping()) }
        #expect(first?.code == .offline)
        #expect(controller.quality == .offline)

        // When another fail-fast operation comes while still offline, it tries (and fails) once more
        let second = await #expect(throws: DepotError.self) { try await controller.perform(Ping()) }
        #expect(second?.code == .offline)
        #expect(transport.requests.count == 2)
        #expect(controller.quality == .offline)

        // An operation of a paused category cannot be the probe: it fails at once rather than wait
        controller.pause(category: .images)
        var paused = Ping()
        paused.category = .images
        let held = await #expect(throws: DepotError.self) { try await controller.perform(paused) }
        #expect(held?.code == .offline)
        #expect(transport.requests.count == 2)
        controller.resume(category: .images)

        // When the network is back, the next one gets through, with no clock moved and nothing queued
        transport.isOffline = false
        let pong = try await controller.perform(Ping())
        #expect(pong.body == Data("pong".utf8))
        #expect(transport.requests.count == 3)
        #expect(controller.quality != .offline)
        #expect(controller.activity.limit == 4)
        _ = await controller.shutdown(grace: .zero)
    }
}
