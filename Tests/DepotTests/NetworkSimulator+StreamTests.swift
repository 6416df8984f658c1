import Depot
import DepotTesting
import Foundation
import Synchronization
import Testing

/// Streamed routes: a script per connection, played on the simulator's clock.
@Suite struct NetworkSimulatorStreamTests {
    static let base = URL(string: "http://sim.test")!

    static func request(_ path: String = "/events", headers: HeaderFields = [:]) -> TransportRequest {
        TransportRequest(url: base.appending(path: path), headers: headers)
    }

    /// Reads one streamed response to its end, noting when each chunk arrived.
    final class StreamReader: Sendable {
        struct Arrival: Equatable, CustomStringConvertible {
            var at: Duration
            var text: String
            var description: String { "\(text.debugDescription) at \(at)" }
        }

        struct State {
            var arrivals: [Arrival] = []
            var status: Int?
            var headers: HeaderFields = [:]
            var error: DepotError?
            var finished = false
        }

        private let state = Mutex(State())
        var arrivals: [Arrival] { state.withLock { $0.arrivals } }
        var status: Int? { state.withLock { $0.status } }
        var headers: HeaderFields { state.withLock { $0.headers } }
        var error: DepotError? { state.withLock { $0.error } }
        var finished: Bool { state.withLock { $0.finished } }

        func read(_ simulator: NetworkSimulator, _ clock: ManualClock, _ request: TransportRequest = request(), onChunk: @Sendable (Data) -> Void = { _ in }) async {
            do {
                let response = try await simulator.send(request)
                state.withLock { ($0.status, $0.headers) = (response.status, response.headers) }
                for try await chunk in response.body {
                    onChunk(chunk)
                    state.withLock { $0.arrivals.append(Arrival(at: clock.elapsed, text: String(decoding: chunk, as: UTF8.self))) }
                }
            } catch {
                state.withLock { $0.error = DepotError.wrap(error, operation: nil, fallback: .transport) }
            }
            state.withLock { $0.finished = true }
        }
    }

    /// Reads `path` to its end while driving the simulator; returns the reader.
    static func readToEnd(_ simulator: NetworkSimulator, _ clock: ManualClock, _ request: TransportRequest = request()) async throws -> StreamReader {
        let reader = StreamReader()
        async let reading: Void = reader.read(simulator, clock, request)
        try await simulator.run(until: { reader.finished }, settled: { reader.finished || simulator.openTransferCount == 1 })
        await reading
        return reader
    }

    /// A parser fed from a reader's chunks, and the events it gave.
    final class ParsedStream: Sendable {
        private let state = Mutex((parser: ServerSentEventParser(), events: [ServerSentEvent]()))
        var events: [ServerSentEvent] { state.withLock { $0.events } }

        func parse(_ chunk: Data) {
            state.withLock { state in
                try? state.parser.parse(chunk) { state.events.append($0) }
            }
        }

        /// Ends the stream; returns the ID to resume from.
        func finish() -> String {
            state.withLock { state in
                state.parser.finish()
                return state.parser.lastEventID
            }
        }
    }

    static func arrival(_ text: String, at time: Duration) -> StreamReader.Arrival {
        .init(at: time, text: text)
    }

    @Test func chunksArriveAtTheScriptedTimesAfterTheHead() async throws {
        // Given a 100 ms round trip and a script: a chunk 1 s after the head, another 2 s later, a close 1 s after that
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000, rtt: .milliseconds(100)), routes: [
            .init(path: "/events") { _ in
                .init(steps: [.send("data: a\n\n", after: .seconds(1)), .send("data: b\n\n", after: .seconds(2)), .close(after: .seconds(1))])
            },
        ])
        // When it is read to the end
        let reader = try await Self.readToEnd(simulator, clock)
        // Then each chunk came at its time, whatever the (tiny) bandwidth, and the body ended at the close
        #expect(reader.arrivals == [Self.arrival("data: a\n\n", at: .milliseconds(1100)), Self.arrival("data: b\n\n", at: .milliseconds(3100))])
        #expect(reader.error == nil)
        #expect(reader.status == 200)
        #expect(reader.headers["Content-Type"] == "text/event-stream")
        #expect(reader.headers["Content-Length"] == nil)
        let record = try #require(simulator.records.first)
        #expect(record.firstByte == .milliseconds(100))
        #expect(record.lastByte == .milliseconds(4100))
        #expect(record.ended == .milliseconds(4100))
        #expect(record.bytes == 18)
        #expect(record.outcome == .completed)
    }

    @Test func aDropFailsTheReadWithConnectionLostAfterTheChunksSent() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .zero), routes: [
            .init(path: "/events") { _ in .init(steps: [.send("data: a\n\n", after: .seconds(1)), .send("data: b\n\n"), .drop(after: .seconds(4))]) },
        ])
        let reader = try await Self.readToEnd(simulator, clock)
        // Two chunks at the same instant are two chunks; the drop comes after them
        #expect(reader.arrivals == [Self.arrival("data: a\n\n", at: .seconds(1)), Self.arrival("data: b\n\n", at: .seconds(1))])
        #expect(reader.error?.code == .connectionLost)
        let record = try #require(simulator.records.first)
        #expect(record.outcome == .failed(.connectionLost))
        #expect(record.ended == .seconds(5))
        #expect(record.lastByte == nil)
    }

    @Test func aScriptThatRunsOutLeavesTheConnectionOpenUntilTheReaderLeaves() async throws {
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .zero), routes: [
            .init(path: "/events") { _ in .init(steps: [.send(Data("data: a\n\n".utf8), after: .seconds(1))]) },
        ])
        let reader = StreamReader()
        let reading = Task { await reader.read(simulator, clock) }
        // When an hour passes
        try await simulator.run(until: .seconds(3600), settled: { reader.finished || simulator.openTransferCount == 1 })
        // Then the one chunk came and the connection is still open
        #expect(reader.arrivals == [Self.arrival("data: a\n\n", at: .seconds(1))])
        #expect(!reader.finished)
        #expect(simulator.openTransferCount == 1)
        // And when the reader leaves, the transfer ends as cancelled
        reading.cancel()
        await reading.value
        #expect(simulator.openTransferCount == 0)
        #expect(simulator.records.first?.outcome == .cancelled)
    }

    @Test func anOfflineSpellCutsAnOpenStreamAndRefusesNewConnections() async throws {
        // Given an event every second, for ever, and the link offline from 2.5 s to 10 s
        let clock = ManualClock()
        let simulator = NetworkSimulator(
            clock: clock,
            link: .init(bandwidth: 1_000_000, rtt: .zero),
            routes: [.init(path: "/events") { _ in .init { index in .send("data: \(index)\n\n", after: .seconds(1)) } }],
            timeline: NetworkSimulator.Change.offline(from: .milliseconds(2500), until: .seconds(10))
        )
        // When it is read
        let cut = try await Self.readToEnd(simulator, clock)
        // Then the chunks sent before the spell arrived, and then the connection was lost
        #expect(cut.arrivals == [Self.arrival("data: 0\n\n", at: .seconds(1)), Self.arrival("data: 1\n\n", at: .seconds(2))])
        #expect(cut.error?.code == .connectionLost)
        #expect(simulator.records.first?.ended == .milliseconds(2500))
        // And a connection during the spell fails like any request
        try await simulator.run(until: .seconds(5))
        await #expect(throws: DepotError.self) { _ = try await simulator.send(Self.request()) }
        #expect(simulator.records.last?.outcome == .failed(.offline))
        // And after it, a new connection streams again from its own start
        try await simulator.run(until: .seconds(10))
        let reader = StreamReader()
        let reading = Task { await reader.read(simulator, clock) }
        try await simulator.run(until: { reader.arrivals.count == 2 }, settled: { reader.finished || simulator.openTransferCount == 1 })
        #expect(reader.arrivals == [Self.arrival("data: 0\n\n", at: .seconds(11)), Self.arrival("data: 1\n\n", at: .seconds(12))])
        reading.cancel()
        await reading.value
    }

    @Test func theScriptIsMadeFromTheRequest() async throws {
        // Given a script that resumes after the request's Last-Event-ID, and answers 204 when told there is no more
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .zero), routes: [
            .init(path: "/events") { request in
                let last = request.headers["Last-Event-ID"] ?? ""
                if last == "done" { return .init(status: 204, headers: [:], steps: [.close()]) }
                let next = (Int(last) ?? 0) + 1
                return .init(steps: [.send("id: \(next)\ndata: x\n\n", after: .seconds(1)), .close()])
            },
        ])
        let fresh = try await Self.readToEnd(simulator, clock)
        let resumed = try await Self.readToEnd(simulator, clock, Self.request(headers: ["Last-Event-ID": "41"]))
        let finished = try await Self.readToEnd(simulator, clock, Self.request(headers: ["Last-Event-ID": "done"]))
        #expect(fresh.arrivals.map(\.text) == ["id: 1\ndata: x\n\n"])
        #expect(resumed.arrivals.map(\.text) == ["id: 42\ndata: x\n\n"])
        #expect(finished.status == 204)
        #expect(finished.arrivals.isEmpty)
        #expect(finished.error == nil)
    }

    @Test func aLazyScriptIsAskedForOneStepAheadOfTheReader() async throws {
        // Given a script of 20,000 events, 1 ms apart, that counts the steps it makes
        let steps = 20_000
        let produced = Atomic(0)
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .zero), routes: [
            .init(path: "/events") { _ in
                .init { index in
                    produced.add(1, ordering: .relaxed)
                    return index < steps ? .send("data: \(index)\n\n", after: .milliseconds(1)) : .close()
                }
            },
        ])
        // When it is read to the end, noting how far ahead of the reader the script ran
        let read = Atomic(0)
        let furthestAhead = Atomic(0)
        let reader = StreamReader()
        async let reading: Void = reader.read(simulator, clock) { _ in
            let count = read.add(1, ordering: .relaxed).newValue
            furthestAhead.max(produced.load(ordering: .relaxed) - count, ordering: .relaxed)
        }
        try await simulator.run(until: { reader.finished }, timeLimit: .seconds(60), quietYields: 1, settled: { reader.finished || simulator.openTransferCount == 1 })
        await reading
        // Then every event came, and the script never ran more than one step ahead
        #expect(read.load(ordering: .relaxed) == steps)
        #expect(reader.error == nil)
        #expect(produced.load(ordering: .relaxed) == steps + 1)
        #expect(furthestAhead.load(ordering: .relaxed) == 1)
        #expect(clock.elapsed == .milliseconds(steps))
    }

    @Test func aParserReadsAStreamCutMidLineAndResumesAfterADrop() async throws {
        // Given a server whose events are cut mid-line, and whose first connection drops after three
        let clock = ManualClock()
        let simulator = NetworkSimulator(clock: clock, link: .init(bandwidth: 1_000_000, rtt: .milliseconds(50)), routes: [
            .init(path: "/events") { request in
                let from = Int(request.headers["Last-Event-ID"] ?? "") ?? 0
                return .init { index in
                    let event = from + index / 2 + 1
                    if from == 0, event > 3 { return .drop(after: .seconds(1)) }
                    if event > 5 { return .close() }
                    return index % 2 == 0 ? .send("id: \(event)\nda", after: .seconds(1)) : .send("ta: e\(event)\r\n\r\n")
                }
            },
        ])
        // When a reader parses it, and reconnects with the last event ID after the drop
        let stream = ParsedStream()
        let first = StreamReader()
        async let firstReading: Void = first.read(simulator, clock) { stream.parse($0) }
        try await simulator.run(until: { first.finished }, settled: { first.finished || simulator.openTransferCount == 1 })
        await firstReading
        let resumeFrom = stream.finish()
        let second = StreamReader()
        async let secondReading: Void = second.read(simulator, clock, Self.request(headers: ["Last-Event-ID": resumeFrom])) { stream.parse($0) }
        try await simulator.run(until: { second.finished }, settled: { second.finished || simulator.openTransferCount == 1 })
        await secondReading
        // Then the events came whole, once each, across the drop
        #expect(first.error?.code == .connectionLost)
        #expect(second.error == nil)
        #expect(resumeFrom == "3")
        #expect(stream.events == (1 ... 5).map { ServerSentEvent(data: "e\($0)", lastEventID: "\($0)") })
    }
}
