import Depot
import DepotTesting
import Foundation
import Testing

/// DepotTesting's fact-waiting kit: ``Recorder`` and ``ManualClock/advanceAndSettle(by:)``.
@Suite(.timeLimit(.minutes(1))) struct RecorderTests {
    @Test func nextWaitsForTheMatchingValueAndMovesPastIt() async throws {
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let recorder = Recorder(stream)
        let waiting = Task { try await recorder.next { $0 > 2 } }
        for value in 1...5 { continuation.yield(value) }
        #expect(try await waiting.value == 3)
        // The cursor is past 3: the next even value is 4, then nothing but 5 is left.
        #expect(try await recorder.next { $0.isMultiple(of: 2) } == 4)
        #expect(try await recorder.next() == 5)
        #expect(recorder.values == [1, 2, 3, 4, 5])
        continuation.finish()
    }

    @Test func aSequenceThatEndsFailsTheWaitAndSaysWhatItRecorded() async throws {
        let recorder = Recorder(AsyncStream<String> { continuation in
            continuation.yield("queued")
            continuation.yield("sending")
            continuation.finish()
        })
        let failure = await #expect(throws: Recorder<String>.Failure.self) { try await recorder.next { $0 == "committed" } }
        #expect(failure?.description == "the sequence ended with no matching value; recorded after the cursor: queued, sending")
        #expect(recorder.isFinished)
    }

    @Test func aWaitThatFindsNothingFailsAfterItsTimeout() async throws {
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let recorder = Recorder(stream, timeout: .milliseconds(50))
        continuation.yield(1)
        let failure = await #expect(throws: Recorder<Int>.Failure.self) { try await recorder.next { $0 == 2 } }
        #expect(failure?.description.hasPrefix("no matching value after 0.05 seconds") == true, "\(failure?.description ?? "")")
        continuation.finish()
    }

    @Test func recordsAControllersEvents() async throws {
        let transport = FixtureTransport(["/hello": .data(Data("hi".utf8))])
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://fixtures.test")!, transport: transport, observability: .init(notificationCenter: nil)))
        struct Hello: NetworkOperation {
            typealias Output = NetworkResponse
            var request: NetworkRequest { .get("hello") }
        }
        let events = Recorder(controller.events())
        _ = try await controller.perform(Hello())
        let finished = try await events.next { $0.kind == .finished }
        #expect(finished.operation == "Hello")
        _ = await controller.shutdown(grace: .zero)
    }

    /// After `advanceAndSettle`, the task the advance woke has run on to its
    /// next sleep: the test sees its next step without yielding and hoping.
    @Test func advanceAndSettleReturnsOnceTheWokenTasksRunAgain() async throws {
        let clock = ManualClock()
        let (steps, continuation) = AsyncStream<Int>.makeStream()
        let recorder = Recorder(steps)
        let ticking = Task {
            for tick in 1...3 {
                try await clock.sleep(for: .seconds(1))
                continuation.yield(tick)
            }
            continuation.finish()
        }
        for tick in 1...3 {
            await clock.sleepers(atLeast: 1)
            await clock.advanceAndSettle(by: .seconds(1))
            #expect(clock.pendingWakeups == 0)
            #expect(try await recorder.next() == tick)
        }
        try await ticking.value
        // With nobody sleeping it returns at once.
        await clock.advanceAndSettle(by: .seconds(1))
        #expect(clock.elapsed == .seconds(4))
    }
}
