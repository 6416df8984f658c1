import Depot
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

@Suite struct TraceTests {
    static func id(_ n: UInt64) -> Ticket.ID { Ticket.ID(rawValue: n) }

    /// A recorder with `count` operations of every kind: succeeded, failed, cancelled, retried, still running.
    static func sampleRecorder(count: Int) -> TraceRecorder {
        let recorder = TraceRecorder()
        let priorities = Priority.allCases
        recorder.quality(.good, at: .zero)
        for n in 1...count {
            let start = Duration.milliseconds(40 * n)
            let priority = priorities[n % priorities.count]
            let category: OperationCategory = n % 3 == 0 ? .images : .timeline
            recorder.enqueued(id(UInt64(n)), name: n % 3 == 0 ? "FetchAvatar" : "FetchTimeline", priority: priority, category: category, at: start)
            recorder.started(id(UInt64(n)), at: start + .milliseconds(30 * (n % 7)))
            if n % 11 == 0 { recorder.started(id(UInt64(n)), at: start + .milliseconds(400)) }
            recorder.firstByte(id(UInt64(n)), at: start + .milliseconds(30 * (n % 7) + 120))
            guard n != count else { continue }  // the last one is still running
            let outcome: Trace.Outcome = n % 13 == 0 ? .failed(.connectionLost) : (n % 17 == 0 ? .cancelled : .succeeded)
            recorder.finished(id(UInt64(n)), at: start + .milliseconds(30 * (n % 7) + 200 + 17 * (n % 23)), bytes: Int64(1_000 * n), outcome: outcome)
        }
        recorder.quality(.poor, at: .milliseconds(40 * count / 3))
        recorder.quality(.offline, at: .milliseconds(40 * count / 2))
        recorder.quality(.moderate, at: .milliseconds(40 * count * 2 / 3))
        return recorder
    }

    @Test func recordsAnOperationsLife() throws {
        let recorder = TraceRecorder()
        recorder.enqueued(Self.id(1), name: "FetchTimeline", priority: .high, category: .timeline, at: .milliseconds(10))
        recorder.started(Self.id(1), at: .milliseconds(15))
        recorder.started(Self.id(1), at: .milliseconds(900))   // a retry
        recorder.firstByte(Self.id(1), at: .seconds(1))
        recorder.finished(Self.id(1), at: .milliseconds(1_500), bytes: 4_200, outcome: .succeeded)
        recorder.quality(.poor, at: .milliseconds(700))
        let trace = recorder.trace()
        let entry = try #require(trace.entries.first)
        #expect(entry.started == .milliseconds(15))
        #expect(entry.firstByte == .seconds(1))
        #expect(entry.attempts == 2)
        #expect(entry.outcome == .succeeded)
        #expect(trace.qualityChanges == [.init(at: .milliseconds(700), quality: .poor)])
        #expect(trace.end == .milliseconds(1_500))
    }

    @Test func jsonRoundTripsWithTimesInSeconds() throws {
        let trace = Self.sampleRecorder(count: 30).trace()
        let data = try trace.jsonData()
        #expect(try Trace(jsonData: data) == trace)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let first = try #require((object["entries"] as? [[String: Any]])?.first)
        #expect(first["enqueued"] as? Double == 0.04)
        #expect(first["priority"] as? String == "low")
        let outcomes = Set(trace.entries.compactMap(\.outcome?.description))
        #expect(outcomes == ["succeeded", "failed:connectionLost", "cancelled"])
    }

    @Test func recorderKeepsAtMostItsCapacity() {
        let recorder = TraceRecorder(capacity: 5)
        for n in 1...8 {
            recorder.enqueued(Self.id(UInt64(n)), name: "Op", priority: .normal, category: .default, at: .seconds(n))
            recorder.finished(Self.id(UInt64(n)), at: .seconds(n), bytes: 0, outcome: .succeeded)
        }
        #expect(recorder.trace().entries.map(\.id) == [4, 5, 6, 7, 8])
    }

    final class SVGCounter: NSObject, XMLParserDelegate {
        var classes: [String: Int] = [:]
        var texts = 0
        func parser(_ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            if let name = attributes["class"] { classes[name, default: 0] += 1 }
            if element == "text" { texts += 1 }
        }
    }

    func parse(_ svg: String) throws -> SVGCounter {
        let parser = XMLParser(data: Data(svg.utf8))
        let counter = SVGCounter()
        parser.delegate = counter
        let ok = parser.parse()
        #expect(ok && parser.parserError == nil)
        return counter
    }

    @Test func svgIsWellFormedWithOneBarPerOperation() throws {
        let trace = Self.sampleRecorder(count: 150).trace()
        let counter = try parse(trace.svg())
        #expect(counter.classes["queued"] == 150)
        #expect(counter.classes["active"] == 150)
        #expect(counter.classes["first-byte"] == 150)
        #expect(counter.classes["failed"] == trace.entries.filter { if case .failed? = $0.outcome { return true } else { return false } }.count)
        #expect(counter.classes["cancelled"] == trace.entries.filter { $0.outcome == .cancelled }.count)
        #expect(counter.classes["quality"] == 4)
    }

    @Test func smallTracesAreLabelledAndNamesEscaped() throws {
        let recorder = TraceRecorder()
        recorder.enqueued(Self.id(1), name: "Fetch<Feed> & \"more\"", priority: .normal, category: .default, at: .zero)
        let small = try parse(recorder.svg())
        let large = try parse(Self.sampleRecorder(count: 150).svg())
        #expect(small.classes["queued"] == 1)
        #expect(small.classes["active"] == nil)   // never started
        // The big one has no per-row names: only title, legend, axis labels.
        #expect(large.texts < 40)
        #expect(recorder.svg().contains("Fetch&lt;Feed&gt; &amp; &quot;more&quot;"))
    }

    @Test func writesASampleWaterfall() throws {
        // Kept for humans: `swift test --filter writesASampleWaterfall` leaves it in the temp folder.
        let url = FileManager.default.temporaryDirectory.appending(path: "depot-waterfall.svg")
        try Self.sampleRecorder(count: 150).svg().write(to: url, atomically: true, encoding: .utf8)
        let small = FileManager.default.temporaryDirectory.appending(path: "depot-waterfall-small.svg")
        try Self.sampleRecorder(count: 24).svg().write(to: small, atomically: true, encoding: .utf8)
        // What was written is the whole, well-formed waterfall.
        let written = try parse(String(contentsOf: url, encoding: .utf8))
        #expect(written.classes["queued"] == 150)
        #expect(try parse(String(contentsOf: small, encoding: .utf8)).classes["queued"] == 24)
    }
}
