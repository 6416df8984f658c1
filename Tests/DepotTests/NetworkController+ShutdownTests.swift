import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import Logging
import Testing

/// The one decision point at exit: what finishes, what is cancelled, and the report.
@Suite(.timeLimit(.minutes(1))) struct NetworkControllerShutdownTests {
    // MARK: Shutdown

    @Test func shutdownLetsAPostFinishAndCancelsTheRest() async throws {
        try await withServer { server in
            let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil)))
            let events = controller.events()
            let post = controller.enqueue(PostEcho(.gated("post"), text: "must arrive", exitPolicy: .finish))
            let avatars = (0..<3).map { controller.enqueue(FetchHello(.hang, variant: "\($0)", category: .images)) }
            let shutdown = Task { await controller.shutdown(grace: .seconds(30)) }
            var cancelled = 0
            for await event in events {
                if case .cancelled = event.detail { cancelled += 1 }
                if cancelled == 3 { break }
            }
            #expect(!post.isFinished)
            server.openGate("post")
            let report = await shutdown.value
            #expect(report.finished == 1)
            #expect(report.cancelled == 3)
            #expect(!report.graceExpired)
            #expect(post.outcome == .succeeded)
            #expect(avatars.allSatisfy { $0.outcome == .cancelled })
            #expect(server.requestCount(for: .gated("post")) == 1)

            let late = await DepotError.from { _ = try await controller.perform(FetchHello()) }
            #expect(late?.code == .shutDown)
        }
    }

    @Test func shutdownCancelsFinishWorkWhenGraceRunsOut() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { _ in
            try await clock.sleep(for: .seconds(1_000_000))  // until cancelled
            return TransportResponse(status: 200, body: .empty)
        }
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://depot.test")!, transport: transport, observability: .init(notificationCenter: nil), environment: .init(clock: clock)))
        let post = controller.enqueue(PostEcho(text: "slow", exitPolicy: .finish))
        let shutdown = Task { await controller.shutdown(grace: .seconds(5)) }
        // The post's transfer, its watchdog and the grace period all wait on the clock.
        await clock.sleepers(atLeast: 3)
        clock.advance(by: .seconds(5))
        let report = await shutdown.value
        #expect(report.graceExpired)
        #expect(report.cancelled == 1)
        #expect(post.outcome == .cancelled)
    }

    @Test func aCancelledShutdownStillEndsFinishWork() async throws {
        // Cancelling the caller ends the grace period early: the `.finish` work left
        // is cancelled like at the end of the grace, never left queued for good.
        // (Which of the grace's two waits ends first is a race: hence the rounds.)
        for _ in 0..<30 {
            let clock = ManualClock()
            let transport = ScriptedTransport { _ in TransportResponse(status: 200, body: .empty) }
            let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://depot.test")!, transport: transport, observability: .init(notificationCenter: nil), environment: .init(clock: clock)))
            controller.pause(category: "held")
            let held = controller.enqueue(FetchHello(category: "held", exitPolicy: .finish))
            let shutdown = Task { await controller.shutdown(grace: .seconds(60)) }
            await clock.sleepers(atLeast: 1)  // the grace period
            shutdown.cancel()
            let report = await shutdown.value
            #expect(held.outcome == .cancelled)
            #expect(report.cancelled == 1)
            #expect(report.graceExpired)
            #expect(controller.activity.queued == 0)
        }
    }

    @Test(.timeLimit(.minutes(1))) func aReleasedControllerStillCompletesHeldWork() async throws {
        var ticket: Ticket?
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Hello, DepotError>, Never>) in
            // Given work held in a paused category when the app lets go of its controller
            let transport = ScriptedTransport { _ in TransportResponse(status: 200, body: .empty) }
            let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://depot.test")!, transport: transport, observability: .init(notificationCenter: nil)))
            controller.pause(category: "held")
            ticket = controller.enqueue(FetchHello(category: "held")) { continuation.resume(returning: $0) }
        }
        // Then its completion is still called, with the reason
        guard case .failure(let error) = result else {
            Issue.record("held work succeeded without a controller: \(result)")
            return
        }
        #expect(error.code == .shutDown)
        #expect(ticket?.isFinished == true)
    }

    @Test func concurrentShutdownsShareOneReport() async throws {
        try await withServer { server in
            let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: URLSessionTransport(), observability: .init(notificationCenter: nil)))
            let hung = controller.enqueue(FetchHello(.hang))
            async let first = controller.shutdown(grace: .seconds(30))
            async let second = controller.shutdown(grace: .seconds(30))
            let (a, b) = await (first, second)
            #expect(a == b)
            #expect(a.cancelled == 1)
            #expect(!a.graceExpired)
            #expect(hung.outcome == .cancelled)
            #expect(controller.isShutDown)
        }
    }

    @Test func shutdownOfAnIdleControllerReportsNothing() async throws {
        let controller = NetworkController(configuration: .init(transport: FileTransport(), observability: .init(notificationCenter: nil)))
        let report = await controller.shutdown(grace: .zero)
        #expect(report == ShutdownReport())
        let rejected = await DepotError.from { _ = try await controller.perform(FetchRaw(url: URL(fileURLWithPath: "/dev/null"))) }
        #expect(rejected?.code == .shutDown)
        let malformed = await DepotError.from { _ = try await controller.perform(FetchHello(path: "http://bad host/")) }
        #expect(malformed?.code == .shutDown)
        #expect(await controller.shutdown(grace: .zero) == ShutdownReport())  // rejections are not counted
    }
}
