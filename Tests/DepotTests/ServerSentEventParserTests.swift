import Depot
import DepotTesting
import Foundation
import Testing

/// WHATWG HTML's "Interpreting an event stream", one rule per row, and the
/// property that matters on a network: where the chunks are cut never changes
/// what the stream means.
@Suite struct ServerSentEventParserTests {
    /// One rule of the standard: a stream, and what it must give once it has ended.
    struct Rule: Sendable, CustomTestStringConvertible {
        var name: String
        var input: [UInt8]
        var events: [ServerSentEvent]
        var lastEventID = ""
        var retry: Duration?
        var comments = 0

        init(_ name: String, _ input: String, _ events: [ServerSentEvent], lastEventID: String = "", retry: Duration? = nil, comments: Int = 0) {
            self.init(name, Array(input.utf8), events, lastEventID: lastEventID, retry: retry, comments: comments)
        }

        init(_ name: String, _ input: [UInt8], _ events: [ServerSentEvent], lastEventID: String = "", retry: Duration? = nil, comments: Int = 0) {
            (self.name, self.input, self.events, self.lastEventID, self.retry, self.comments) = (name, input, events, lastEventID, retry, comments)
        }

        var testDescription: String { name }
    }

    static func event(_ data: String, _ type: String = "message", id: String = "") -> ServerSentEvent {
        ServerSentEvent(type: type, data: data, lastEventID: id)
    }

    static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    static let rules: [Rule] = [
        // Line ends
        Rule("LF ends a line", "data: a\n\n", [event("a")]),
        Rule("CR ends a line", "data: a\r\r", [event("a")]),
        Rule("CRLF ends a line", "data: a\r\n\r\n", [event("a")]),
        Rule("CRLF is one line end, not two (no blank line between)", "data: a\r\ndata: b\r\n\r\n", [event("a\nb")]),
        Rule("CR then CRLF is two line ends", "data: a\r\r\n", [event("a")]),
        Rule("LF then CR is two line ends", "data: a\n\r", [event("a")]),
        Rule("only CR and LF end lines: a form feed or U+2028 does not", "event: a\u{0C}b\u{2028}\ndata: x\u{85}\n\n", [event("x\u{85}", "a\u{0C}b\u{2028}")]),
        Rule("mixed line ends", "data: a\rdata: b\ndata: c\r\n\n", [event("a\nb\nc")]),
        // Byte order mark
        Rule("a BOM at the start is stripped", bom + Array("data: a\n\n".utf8), [event("a")]),
        Rule("only one BOM is stripped", bom + bom + Array("data: a\n\ndata: b\n\n".utf8), [event("b")]),
        Rule("a BOM at a later line's start is part of the field name", Array("data: a\n\n".utf8) + bom + Array("data: b\n\n".utf8), [event("a")]),
        Rule("half a BOM is not one", [0xEF, 0xBB] + Array("\ndata: a\n\n".utf8), [event("a")]),
        Rule("a BOM in a value stays", Array("data: ".utf8) + bom + Array("\n\n".utf8), [event("\u{FEFF}")]),
        // Comments
        Rule("a colon first makes a comment", ": keep-alive\ndata: a\n\n:\n", [event("a")], comments: 2),
        Rule("a comment does not end an event", "data: a\n: ping\ndata: b\n\n", [event("a\nb")], comments: 1),
        // Field and value
        Rule("a line without a colon is a field with an empty value", "data\n\n", [event("")]),
        Rule("two empty data lines give one LF", "data\ndata\n\n", [event("\n")]),
        Rule("one leading space is stripped", "data: a\n\n", [event("a")]),
        Rule("only one leading space is stripped", "data:  a \n\n", [event(" a ")]),
        Rule("no space after the colon", "data:a\n\n", [event("a")]),
        Rule("a tab is not a space", "data:\ta\n\n", [event("\ta")]),
        Rule("a value keeps its colons", "data: a: b\n\n", [event("a: b")]),
        Rule("field names are case-sensitive", "Data: a\n\n", []),
        Rule("unknown fields are ignored", "foo: bar\ndata: a\nretries: 5\n\n", [event("a")]),
        // Data
        Rule("data lines are joined with LF", "data: a\ndata: b\ndata: c\n\n", [event("a\nb\nc")]),
        Rule("a blank line without data dispatches nothing", "\n\n\nid: 1\n\n", [], lastEventID: "1"),
        Rule("a blank line without data forgets the event type", "event: add\n\ndata: a\n\n", [event("a")]),
        Rule("a trailing LF in data comes from the last data line only", "data: a\ndata\n\n", [event("a\n")]),
        // Event type
        Rule("event sets the type", "event: add\ndata: a\n\n", [event("a", "add")]),
        Rule("the type lasts one event", "event: add\ndata: a\n\ndata: b\n\n", [event("a", "add"), event("b")]),
        Rule("an empty event type means message", "event\ndata: a\n\n", [event("a")]),
        Rule("the last event field wins", "event: a\nevent: b\ndata: x\n\n", [event("x", "b")]),
        // Retry
        Rule("retry in milliseconds", "retry: 1500\n", [], retry: .milliseconds(1500)),
        Rule("retry with a sign is ignored", "retry: +5\nretry: -5\n", []),
        Rule("retry with a space after is ignored", "retry: 5 \n", []),
        Rule("retry with a fraction is ignored", "retry: 1.5\n", []),
        Rule("an empty retry is ignored", "retry\nretry:\n", []),
        Rule("an invalid retry keeps the previous one", "retry: 700\nretry: 7x\n", [], retry: .milliseconds(700)),
        Rule("retry saturates instead of overflowing", "retry: 99999999999999999999999\n", [], retry: .milliseconds(Int64.max)),
        Rule("retry with non-ASCII digits is ignored", "retry: ٥\n", []),
        // Last event ID
        Rule("id persists from event to event", "id: 1\ndata: a\n\ndata: b\n\n", [event("a", id: "1"), event("b", id: "1")], lastEventID: "1"),
        Rule("an empty id resets it", "id: 1\ndata: a\n\nid\ndata: b\n\n", [event("a", id: "1"), event("b")], lastEventID: ""),
        Rule("an id with NUL is ignored", Array("id: 1\ndata: a\n\nid: 2\u{0}3\ndata: b\n\n".utf8), [event("a", id: "1"), event("b", id: "1")], lastEventID: "1"),
        Rule("id counts from the blank line, even without data", "id: 7\n\n", [], lastEventID: "7"),
        Rule("id may come after data", "data: a\nid: 3\n\n", [event("a", id: "3")], lastEventID: "3"),
        Rule("an id in a cut-off event is not committed", "id: 1\ndata: a\n\nid: 2\ndata: b\n", [event("a", id: "1")], lastEventID: "1"),
        // End of stream
        Rule("an event cut off before its blank line is discarded", "data: a\n\ndata: b\n", [event("a")]),
        Rule("a last line without a line end is discarded", "data: a\n\ndata: b", [event("a")]),
        Rule("a CR at the very end still ends the line", "data: a\n\r", [event("a")]),
        // UTF-8
        Rule("UTF-8 is decoded", "event: é\ndata: 日本\n\n", [event("日本", "é")]),
        Rule("invalid UTF-8 becomes U+FFFD", Array("data: ".utf8) + [0xFF, 0xC3] + Array("\nid: ".utf8) + [0xE6] + Array("\n\n".utf8), [event("\u{FFFD}\u{FFFD}", id: "\u{FFFD}")], lastEventID: "\u{FFFD}"),
        Rule("a sequence cut by a line end is two replacements", Array("data: ".utf8) + [0xE6, 0x97] + Array("\ndata: ".utf8) + [0xA5] + Array("\n\n".utf8), [event("\u{FFFD}\n\u{FFFD}")]),
    ]

    /// What parsing a whole stream gave.
    struct Outcome: Equatable, CustomStringConvertible {
        var events: [ServerSentEvent] = []
        var lastEventID = ""
        var retry: Duration?
        var comments = 0
        var tooLarge = false

        var description: String { "\(events) id \(lastEventID.debugDescription) retry \(retry.map { "\($0)" } ?? "nil") comments \(comments)\(tooLarge ? " tooLarge" : "")" }
    }

    /// Parses `chunks` as one stream and ends it.
    static func outcome(_ chunks: [Data], maximumEventSize: Int = ServerSentEventParser.defaultMaximumEventSize) -> Outcome {
        var parser = ServerSentEventParser(maximumEventSize: maximumEventSize)
        var outcome = Outcome()
        do {
            for chunk in chunks {
                try parser.parse(chunk) { outcome.events.append($0) }
            }
        } catch {
            outcome.tooLarge = error.code == .tooLarge
        }
        parser.finish()
        (outcome.lastEventID, outcome.retry, outcome.comments) = (parser.lastEventID, parser.reconnectionTime, parser.commentCount)
        return outcome
    }

    /// `bytes` cut at `cuts` (sorted offsets), as slices of one `Data`, so each chunk's indices start past zero.
    static func chunks(_ bytes: Data, cuts: [Int]) -> [Data] {
        var chunks: [Data] = []
        var start = bytes.startIndex
        for cut in cuts + [bytes.count] {
            chunks.append(bytes[start ..< bytes.startIndex + cut])
            start = bytes.startIndex + cut
        }
        return chunks
    }

    // MARK: The rules

    @Test(arguments: rules)
    func rule(_ rule: Rule) {
        let outcome = Self.outcome([Data(rule.input)])
        #expect(outcome.events == rule.events)
        #expect(outcome.lastEventID == rule.lastEventID)
        #expect(outcome.retry == rule.retry)
        #expect(outcome.comments == rule.comments)
        #expect(!outcome.tooLarge)
    }

    @Test func theEventsOfAChunkComeFromTheArrayFormToo() throws {
        var parser = ServerSentEventParser()
        #expect(try parser.parse(Data("data: hel".utf8)) == [])
        #expect(try parser.parse(Data("lo\n\nid: 2\nevent: x\ndata: y\n\n".utf8)) == [Self.event("hello"), Self.event("y", "x", id: "2")])
    }

    @Test func finishStartsTheNextStreamFreshButKeepsTheEventSourceState() throws {
        // Given a stream cut inside an event, after an id and a retry
        var parser = ServerSentEventParser()
        _ = try parser.parse(Data("retry: 3000\nid: 1\ndata: a\n\nid: 2\ndata: cut".utf8))
        // When it ends and a reconnection's stream starts with a BOM
        parser.finish()
        let events = try parser.parse(Data(Self.bom + Array(": hi\ndata: b\n\n".utf8)))
        // Then the cut event is gone, the BOM is stripped again, and the new
        // stream's last event ID buffer started empty, as the standard says
        #expect(events == [Self.event("b")])
        #expect(parser.reconnectionTime == .seconds(3))
        #expect(parser.commentCount == 1)
        #expect(parser.lastEventID == "")
    }

    // MARK: Chunking never matters

    /// The pieces random streams are built from: every rule's ingredients.
    static let pieces: [[UInt8]] = [
        "data", "data:", "data: ", "event: ", "event", "id: ", "id", "retry: ", "retry:", ":", " ", "x", "é", "12", "+5",
        "\r", "\n", "\r\n", "\n\n", "\r\r", "foo: ",
    ].map { Array($0.utf8) } + [bom, [0xEF], [0xBB, 0xBF], [0x00], [0xFF], [0xC3], [0xE6, 0x97]]

    static func randomStream(_ random: inout SeededGenerator) -> Data {
        var bytes: [UInt8] = []
        for _ in 0 ..< Int.random(in: 0 ... 40, using: &random) {
            bytes += pieces.randomElement(using: &random)!
        }
        return Data(bytes)
    }

    static var streams: [Data] {
        var random = SeededGenerator(seed: 20_250_601)
        return rules.map { Data($0.input) } + (0 ..< 300).map { _ in randomStream(&random) }
    }

    @Test func everySplitPointGivesTheSameOutcome() {
        for stream in Self.streams {
            let whole = Self.outcome([stream])
            for cut in 0 ... stream.count {
                let split = Self.outcome(Self.chunks(stream, cuts: [cut]))
                #expect(split == whole, "cut at \(cut) of \(Array(stream))")
                if split != whole { break }
            }
        }
    }

    @Test func randomMultiSplitsAndSingleBytesGiveTheSameOutcome() {
        var random = SeededGenerator(seed: 7)
        for stream in Self.streams {
            let whole = Self.outcome([stream])
            #expect(Self.outcome(Self.chunks(stream, cuts: Array(0 ... stream.count))) == whole, "byte by byte: \(Array(stream))")
            for _ in 0 ..< 20 {
                let cuts = (0 ..< Int.random(in: 1 ... 6, using: &random)).map { _ in Int.random(in: 0 ... stream.count, using: &random) }.sorted()
                #expect(Self.outcome(Self.chunks(stream, cuts: cuts)) == whole, "cuts \(cuts) of \(Array(stream))")
            }
        }
    }

    @Test func theSizeLimitThrowsTheSameWhereverTheChunksAreCut() {
        var random = SeededGenerator(seed: 11)
        for stream in Self.streams {
            let whole = Self.outcome([stream], maximumEventSize: 12)
            for _ in 0 ..< 10 {
                let cuts = (0 ..< Int.random(in: 1 ... 8, using: &random)).map { _ in Int.random(in: 0 ... stream.count, using: &random) }.sorted()
                #expect(Self.outcome(Self.chunks(stream, cuts: cuts), maximumEventSize: 12) == whole, "cuts \(cuts) of \(Array(stream))")
            }
        }
    }

    // MARK: Bounded memory

    @Test func anEndlessLineThrowsTooLargeOnceItPassesTheLimit() {
        // Given a parser bounded at 100 bytes, fed a line that never ends, 10 bytes at a time
        var parser = ServerSentEventParser(maximumEventSize: 100)
        var fed = 0
        var thrown: DepotError?
        while fed < 10_000 {
            do {
                try parser.parse(Data("data: xxxx".utf8)) { _ in }
                fed += 10
            } catch {
                thrown = error
                break
            }
        }
        // Then it threw tooLarge at the chunk that passed 100 bytes: it never held more
        #expect(thrown?.code == .tooLarge)
        #expect(fed == 100)
        // And the stream stays failed until it is finished
        #expect(throws: DepotError.self) { try parser.parse(Data("\n\n".utf8)) }
        parser.finish()
        #expect((try? parser.parse(Data("data: a\n\n".utf8))) == [Self.event("a")])
    }

    @Test func manyDataLinesThrowTooLargeOnceTheEventPassesTheLimit() {
        var parser = ServerSentEventParser(maximumEventSize: 100)
        var lines = 0
        #expect(throws: DepotError.self) {
            while lines < 1000 {
                try parser.parse(Data("data: 0123456789\n".utf8)) { _ in }
                lines += 1
            }
        }
        // Each line adds 11 bytes of data: the 9th is the first to take a line plus the data past 100.
        #expect(lines == 8)
    }

    @Test func anEventExactlyAtTheLimitPasses() throws {
        let value = String(repeating: "x", count: 94)   // "data: " + 94 = a 100-byte line
        var parser = ServerSentEventParser(maximumEventSize: 100)
        #expect(try parser.parse(Data("data: \(value)\n\n".utf8)) == [Self.event(value)])
        var smaller = ServerSentEventParser(maximumEventSize: 99)
        #expect(throws: DepotError.self) { try smaller.parse(Data("data: \(value)\n\n".utf8)) }
    }
}
