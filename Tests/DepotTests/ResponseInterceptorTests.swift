@testable import Depot
import DepotTesting
import Foundation
import Synchronization
import Testing

/// Interceptors see every attempt in their documented order, and can pass it
/// on, fail a success, or retry with a delay; the retry policy is the last of them.
@Suite struct ResponseInterceptorTests {
    /// Records which interceptor saw which attempt, and answers as told.
    struct Recorder: ResponseInterceptor {
        let name: String
        let seen: Locked<[String]>
        var answer: @Sendable (InterceptedAttempt) -> InterceptorDecision = { _ in .proceed }

        func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision {
            seen.withLock { $0.append("\(name)#\(attempt.attempt):\(attempt.outcome.status ?? 0)") }
            return answer(attempt)
        }
    }

    struct Fetch: NetworkOperation {
        typealias Output = NetworkResponse
        var path = "a"
        var request: NetworkRequest { .get(path) }
    }

    func controller(_ transport: FixtureTransport, interceptors: [any ResponseInterceptor], clock: ManualClock = ManualClock()) -> NetworkController {
        NetworkController(configuration: .init(baseURL: URL(string: "http://fixtures.test/")!, transport: transport, interceptors: interceptors, observability: .init(notificationCenter: nil), environment: .init(clock: clock)))
    }

    @Test func interceptorsRunInOrderAndTheFirstDecisionWins() async throws {
        let seen = Locked<[String]>([])
        let transport = FixtureTransport()
        transport.respondToOtherPaths(with: .data(Data("{}".utf8)))
        let controller = controller(transport, interceptors: [
            Recorder(name: "a", seen: seen),
            Recorder(name: "b", seen: seen) { _ in .fail(DepotError(.server, detail: "an error document in a 200")) },
            Recorder(name: "c", seen: seen),
        ])
        let error = await DepotError.from { _ = try await controller.perform(Fetch()) }
        #expect(error?.code == .server)
        #expect(error?.detail == "an error document in a 200")
        #expect(error?.operation == "Fetch")
        #expect(seen.value == ["a#1:200", "b#1:200"])
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func aRetryWaitsItsDelayOnTheClockAndCountsAsAnAttempt() async throws {
        let seen = Locked<[String]>([])
        let clock = ManualClock()
        let transport = FixtureTransport()
        transport.respondToOtherPaths(with: .data(Data("{}".utf8)))
        // Retry the first attempt once after 5 s, then pass.
        let controller = controller(transport, interceptors: [
            Recorder(name: "retry", seen: seen) { $0.attempt == 1 ? .retry(after: .seconds(5)) : .proceed },
        ], clock: clock)
        let events = DepotTesting.Recorder(controller.events())
        let task = Task { try await controller.perform(Fetch()) }
        // The retry's wake-up time is fixed before it is announced: moving the
        // clock now wakes it, whether or not its sleep has begun.
        let retried = try await events.next { $0.kind == .retried }
        #expect(retried.delay == .seconds(5))
        #expect(seen.value == ["retry#1:200"])
        clock.advance(by: .seconds(5))
        #expect(try await task.value.status == 200)
        #expect(seen.value == ["retry#1:200", "retry#2:200"])
        #expect(transport.requests.count == 2)
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func theRetryPolicyComesLastAndSeesOnlyWhatOthersPassed() async throws {
        let seen = Locked<[String]>([])
        let transport = FixtureTransport()
        transport.respondToOtherPaths(with: .status(503))
        // An interceptor that turns a 503 into a final failure: the policy never retries it.
        let controller = controller(transport, interceptors: [
            Recorder(name: "first", seen: seen) { attempt in
                attempt.outcome.status == 503 ? .fail(DepotError(.server, status: 503, detail: "maintenance: do not retry")) : .proceed
            },
        ])
        let error = await DepotError.from { _ = try await controller.perform(Fetch()) }
        #expect(error?.detail == "maintenance: do not retry")
        #expect(transport.requests.count == 1)
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func theRetryPolicyAsAnInterceptor() async {
        let request = TransportRequest(url: URL(string: "http://a.test/x")!)
        let context = InterceptorContext()
        let unavailable = DepotError(.server, status: 503)
        let first = await RetryPolicy.default.intercept(InterceptedAttempt(request: request, outcome: .failure(unavailable), attempt: 1), context: context)
        #expect(first.retryDelay != nil)
        let notFound = await RetryPolicy.default.intercept(InterceptedAttempt(request: request, outcome: .failure(DepotError(.notFound, status: 404)), attempt: 1), context: context)
        #expect(notFound.isProceed)
        let last = await RetryPolicy.default.intercept(InterceptedAttempt(request: request, outcome: .failure(unavailable), attempt: 3), context: context)
        #expect(last.failure?.detail == "attempts exhausted after 3 attempts")
        let success = await RetryPolicy.default.intercept(InterceptedAttempt(request: request, outcome: .success(NetworkResponse(status: 200, url: request.url)), attempt: 1), context: context)
        #expect(success.isProceed)
    }
}
