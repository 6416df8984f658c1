import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import Logging
import Testing

/// Central control: pausing, resuming and cancelling by category, the limit, cancelAll.
@Suite(.timeLimit(.minutes(1))) struct NetworkControllerControlTests {
    // MARK: Central control

    @Test func pauseResumeAndCancelByCategory() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                controller.pause(category: .images)
                #expect(controller.pausedCategories == [.images])
                let image = controller.enqueue(FetchHello(.hello, variant: "image", category: .images))
                let doomed = controller.enqueue(FetchHello(.hello, variant: "doomed", category: .images))
                let output = try await controller.perform(FetchHello())
                #expect(output.message == "hello")
                #expect(controller.activity.queued == 2)
                #expect(!image.isFinished)
                doomed.cancel()
                controller.resume(category: .images)
                await controller.waitUntilIdle()
                #expect(image.outcome == .succeeded)
                #expect(doomed.outcome == .cancelled)
                #expect(server.requestCount(for: .hello) == 2)

                let hung = controller.enqueue(FetchHello(.hang, category: .images))
                let bystander = controller.enqueue(FetchHello(.gated("bystander")))
                controller.cancel(category: .images)
                server.openGate("bystander")
                await controller.waitUntilIdle()
                #expect(hung.outcome == .cancelled)
                #expect(bystander.outcome == .succeeded)
            }
        }
    }

    @Test func cancelAllCancelsEverything() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: { $0.limits.concurrency = .fixed(1) }) { controller in
                let tickets = (0..<4).map { controller.enqueue(FetchHello(.hang, variant: "\($0)")) }
                controller.cancelAll()
                await controller.waitUntilIdle()
                #expect(tickets.allSatisfy { $0.outcome == .cancelled })
            }
        }
    }
}
