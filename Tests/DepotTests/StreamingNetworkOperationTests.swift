import DemoServer
import Depot
import DepotAsyncHTTPClient
import Foundation
import Synchronization
import Testing

/// A `StreamingNetworkOperation` gets an accepted body chunk by chunk, under
/// the transfer's rules, against the real DemoServer.
@Suite(.timeLimit(.minutes(1)))
struct StreamingNetworkOperationTests {
    /// Keeps what arrives, and how.
    final class RecordingSink: ResponseBodySink {
        struct State {
            var chunks = 0
            var bytes = Data()
            var failures: [DepotError] = []
        }

        let state = Mutex(State())

        func receive(_ chunk: Data) async throws {
            state.withLock { state in
                state.chunks += 1
                state.bytes.append(chunk)
            }
        }

        func fail(_ error: DepotError) async {
            state.withLock { $0.failures.append(error) }
        }
    }

    /// Every sink made, in order.
    final class SinkLog: Sendable {
        let sinks = Mutex<[RecordingSink]>([])
        var all: [RecordingSink] { sinks.withLock { $0 } }
    }

    struct StreamBody: StreamingNetworkOperation {
        var fault: DemoServer.Fault
        var log: SinkLog
        var request: NetworkRequest { .get(fault.path) }

        func makeBodySink(for response: NetworkResponse, context: OperationContext) async throws -> RecordingSink? {
            let sink = RecordingSink()
            log.sinks.withLock { $0.append(sink) }
            return sink
        }

        /// The streamed bytes, and whether the response held none of them.
        func process(_ response: NetworkResponse, streamedTo sink: RecordingSink, context: OperationContext) async throws -> Received {
            Received(body: sink.state.withLock { $0.bytes }, streamed: true, responseBodyWasEmpty: response.body.isEmpty)
        }

        func process(_ response: NetworkResponse, context: OperationContext) async throws -> Received {
            Received(body: response.body, streamed: false, responseBodyWasEmpty: response.body.isEmpty)
        }
    }

    struct Received: Sendable {
        var body: Data
        var streamed: Bool
        var responseBodyWasEmpty: Bool
    }

    func withStreaming(_ configure: @escaping (inout NetworkController.Configuration) -> Void = { _ in }, _ body: (DemoServer, NetworkController) async throws -> Void) async throws {
        try await withServer { server in
            try await withController(AsyncHTTPClientTransport(), baseURL: server.baseURL, configure: configure) { controller in
                try await body(server, controller)
            }
        }
    }

    @Test func anAcceptedBodyGoesToTheSinkChunkByChunk() async throws {
        try await withStreaming { _, controller in
            // When 300 KB are fetched by a streaming operation
            let log = SinkLog()
            let received = try await controller.perform(StreamBody(fault: .bytes(300_000), log: log))

            // Then one sink took every byte, in several chunks, and nothing was buffered
            #expect(received.streamed && received.responseBodyWasEmpty)
            #expect(received.body == Data(repeating: UInt8(ascii: "b"), count: 300_000))
            #expect(log.all.count == 1)
            #expect(log.all.first.map { $0.state.withLock { $0.chunks } } ?? 0 > 1)
            #expect(log.all.first?.state.withLock { $0.failures }.isEmpty == true)
        }
    }

    @Test func aNon2xxResponseIsBufferedAndValidated() async throws {
        try await withStreaming({ $0.retries.policy = .never }) { _, controller in
            // When a streaming operation gets a 503 with a body
            let log = SinkLog()
            let error = await DepotError.from { _ = try await controller.perform(StreamBody(fault: .status(503, body: "come back later"), log: log)) }

            // Then no sink was asked for: validate saw the whole body and failed as always
            #expect(log.all.isEmpty)
            #expect(error?.code == .server)
            #expect(error?.status == 503)
            #expect(error?.bodyExcerpt?.contains("come back later") == true)
        }
    }

    @Test func aTruncatedBodyFailsItsSinkAndTheRetryGetsAFreshOne() async throws {
        try await withStreaming({ $0.retries.policy = RetryPolicy(maximumAttempts: 2, baseDelay: .zero) }) { _, controller in
            // Given a body cut short against its Content-Length the first time only
            let log = SinkLog()
            let fault = DemoServer.Fault.feed(items: 500, chunkBytes: 300, tails: [.truncated, .complete])

            // When a streaming operation fetches it
            let received = try await controller.perform(StreamBody(fault: fault, log: log))

            // Then the first sink was failed with the transfer's error, and the retry's
            // own sink took the whole second answer
            let sinks = log.all
            #expect(sinks.count == 2)
            #expect(sinks.first?.state.withLock { $0.failures.map(\.code) } == [.connectionLost])
            #expect(sinks.last?.state.withLock { $0.failures }.isEmpty == true)
            #expect(received.streamed)
            #expect(String(decoding: received.body, as: UTF8.self).hasSuffix("</channel></rss>\n"))
            #expect(String(decoding: received.body, as: UTF8.self).contains("número 499 v2"))
        }
    }

    /// A streaming operation whose sink cannot be made.
    struct NoSink: StreamingNetworkOperation {
        struct Refused: Error {}
        var request: NetworkRequest { .get(DemoServer.Fault.bytes(300_000).path) }
        func makeBodySink(for response: NetworkResponse, context: OperationContext) async throws -> RecordingSink? {
            throw Refused()
        }
        func process(_ response: NetworkResponse, streamedTo sink: RecordingSink, context: OperationContext) async throws -> Int { 0 }
        func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int { response.body.count }
    }

    @Test func aSinkThatCannotBeMadeFailsTheOperationWithoutARetry() async throws {
        try await withStreaming({ $0.retries.policy = RetryPolicy(maximumAttempts: 3, baseDelay: .zero) }) { server, controller in
            // When a streaming operation's sink cannot be made, under a policy that retries transfers
            let error = await DepotError.from { _ = try await controller.perform(NoSink()) }

            // Then it fails as the operation's own failure, with the status, after one request
            #expect(error?.code == .processing)
            #expect(error?.status == 200)
            #expect(error?.underlying is NoSink.Refused)
            #expect(server.requestCount(for: .bytes(300_000)) == 1)
        }
    }

    /// Asks for one retry of the first accepted attempt.
    struct RetryFirstAttempt: ResponseInterceptor {
        func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision {
            if case .success = attempt.outcome, attempt.attempt == 1 { return .retry(after: .zero) }
            return .proceed
        }
    }

    @Test func aStreamedBodyAnInterceptorRejectsFailsItsSink() async throws {
        try await withStreaming({ $0.interceptors = [RetryFirstAttempt()] }) { _, controller in
            // When an interceptor asks to retry a streamed response
            let log = SinkLog()
            let received = try await controller.perform(StreamBody(fault: .bytes(50_000), log: log))

            // Then the first attempt's sink was failed, and the second's was processed
            let sinks = log.all
            #expect(sinks.count == 2)
            #expect(sinks.first?.state.withLock { $0.failures.count } == 1)
            #expect(sinks.last?.state.withLock { $0.failures }.isEmpty == true)
            #expect(received.streamed && received.body.count == 50_000)
        }
    }

    @Test func theSizeLimitStopsAStreamedBodyAndFailsItsSink() async throws {
        try await withStreaming({
            $0.limits.maximumBodySize = 200_000
            $0.retries.policy = .never
        }) { _, controller in
            // When a streaming operation fetches an endless body
            let log = SinkLog()
            let error = await DepotError.from { _ = try await controller.perform(StreamBody(fault: .huge, log: log)) }

            // Then the limit stops it, and the sink hears why, having taken no more than the limit
            #expect(error?.code == .tooLarge)
            #expect(log.all.count == 1)
            #expect(log.all.first?.state.withLock { $0.failures.map(\.code) } == [.tooLarge])
            #expect((log.all.first?.state.withLock { $0.bytes.count } ?? .max) <= 200_000)
        }
    }
}
