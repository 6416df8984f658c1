import Depot
@testable import DepotStore
import Dispatch
import Foundation
import Testing

/// The hand-off between a transfer (Swift concurrency) and a streaming write
/// transaction (the store's writer thread): bounded, ordered, and failures
/// reach the other side.
@Suite(.timeLimit(.minutes(1))) struct StreamedBodyTests {
    /// Calls `next()` `count` times (or until the end) on a dispatch thread, as the writer does.
    func read(_ body: StreamedBody, count: Int = .max) async throws -> [Data] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    var chunks: [Data] = []
                    while chunks.count < count, let chunk = try body.next() { chunks.append(chunk) }
                    continuation.resume(returning: chunks)
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    func chunk(_ byte: UInt8) -> Data { Data([byte]) }

    @Test func theReaderGetsEveryChunkInOrderThenTheEnd() async throws {
        let body = StreamedBody()
        for byte in UInt8(1)...3 { try await body.send(chunk(byte)) }
        body.complete()
        #expect(try await read(body) == [chunk(1), chunk(2), chunk(3)])
    }

    @Test func aFullHandOffMakesTheSenderWaitForTheReader() async throws {
        // Given a hand-off holding as many chunks as it takes
        let body = StreamedBody(capacity: 4)
        for byte in UInt8(1)...4 { try await body.send(chunk(byte)) }

        // Then one more send waits (a cancelled one gives up, its chunk never taken)
        let cancelled = Task { try await body.send(chunk(5)) }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }

        // and a waiting sender goes on once the reader has taken a chunk
        let waiting = Task { try await body.send(chunk(6)) }
        #expect(try await read(body, count: 1) == [chunk(1)])
        try await waiting.value
        body.complete()
        #expect(try await read(body) == [chunk(2), chunk(3), chunk(4), chunk(6)])
    }

    @Test func aTransferFailureReachesTheReaderAtOnce() async throws {
        // Given chunks waiting
        let body = StreamedBody()
        try await body.send(chunk(1))
        try await body.send(chunk(2))

        // When the transfer fails
        body.fail(DepotError(.connectionLost, detail: "cut short"))

        // Then the reader hears it before any chunk left over, and so does the commit gate
        let error = await #expect(throws: DepotError.self) { _ = try await read(body) }
        #expect(error?.code == .connectionLost)
        #expect(throws: DepotError.self) { try body.awaitEnd() }
    }

    @Test func aReaderThatFailedStopsTheTransfer() async throws {
        // Given a reader that stopped with an error (a malformed document)
        let body = StreamedBody(capacity: 1)
        try await body.send(chunk(1))
        let waiting = Task { try await body.send(chunk(2)) }
        body.finishReading(error: DepotError(.decoding, detail: "malformed"))

        // Then the waiting send, and every later one, throws it: the transfer stops
        let first = await #expect(throws: DepotError.self) { try await waiting.value }
        #expect(first?.code == .decoding)
        let later = await #expect(throws: DepotError.self) { try await body.send(chunk(3)) }
        #expect(later?.code == .decoding)
    }
}
