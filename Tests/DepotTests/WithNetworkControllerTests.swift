import Depot
import DepotTesting
import Foundation
import Testing

/// `withNetworkController` shuts its controller down when the body returns or throws.
@Suite(.timeLimit(.minutes(1))) struct WithNetworkControllerTests {
    struct Boom: Error {}

    @Test func theControllerIsShutDownWhenTheBodyReturns() async throws {
        let clock = ManualClock()
        var kept: NetworkController?
        let answer = try await withNetworkController(.init(transport: FixtureTransport(), observability: .init(notificationCenter: nil), environment: .init(clock: clock))) { controller in
            kept = controller
            #expect(!controller.isShutDown)
            return 42
        }
        #expect(answer == 42)
        let controller = try #require(kept)
        #expect(controller.isShutDown)
        let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: URL(string: "file:///nothing")!)) }
        #expect(error?.code == .shutDown)
    }

    @Test func theControllerIsShutDownWhenTheBodyThrows() async throws {
        var kept: NetworkController?
        await #expect(throws: Boom.self) {
            try await withNetworkController(.init(transport: FixtureTransport(), observability: .init(notificationCenter: nil))) { controller in
                kept = controller
                throw Boom()
            }
        }
        #expect(try #require(kept).isShutDown)
    }
}
