import Depot
import Foundation
import Seeded

extension FuzzTargets {
    /// The bounds the first byte chooses between (its low two bits): the
    /// default, and three small ones that make ``DepotError/Code/tooLarge`` common.
    static let sseLimits = [ServerSentEventParser.defaultMaximumEventSize, 256, 16, 1]

    /// `ServerSentEventParser` on an arbitrary stream, cut into chunks three ways.
    ///
    /// The input is one options byte, then the stream: the byte's low two bits
    /// pick `maximumEventSize` from ``sseLimits``, and the whole byte seeds
    /// the random cuts.
    ///
    /// Invariants: the stream in one chunk, byte by byte, and cut at seeded
    /// random points gives the same events, the same `tooLarge` (or none) after
    /// the same events, and the same last event ID, reconnection time and
    /// comment count; no event's type is empty or holds a line end, no data
    /// holds a CR, and no last event ID holds a NUL, CR or LF.
    static func serverSentEvents(_ data: Data) {
        guard let options = data.first else { return }
        let stream = data.dropFirst()
        let limit = sseLimits[Int(options & 3)]
        let whole = sseOutcome([stream], limit: limit)
        let bytes = stream.indices.map { stream[$0 ... $0] }
        var random = SplitMix64(seed: UInt64(options) &+ UInt64(stream.count) << 8)
        var cuts: [Data] = []
        var start = stream.startIndex
        while start < stream.endIndex {
            let end = min(stream.endIndex, start + Int(random.next() % 9))
            cuts.append(stream[start ..< end])
            start = end
        }
        for (name, chunks) in [("byte by byte", bytes), ("cut at random", cuts)] {
            let outcome = sseOutcome(chunks, limit: limit)
            check(outcome == whole, "sse", "\(Array(data)) \(name) gave \(outcome), in one chunk \(whole)")
        }
        for event in whole.events {
            // Only CR and LF end lines in an event stream: a form feed or U+2028 may be in a type.
            let type = event.type.unicodeScalars
            check(!type.isEmpty && !type.contains("\r") && !type.contains("\n"), "sse", "\(Array(data)) gave the type \(event.type.debugDescription)")
            check(!event.data.unicodeScalars.contains("\r"), "sse", "\(Array(data)) gave data with a CR: \(event.data.debugDescription)")
        }
        let id = whole.lastEventID.unicodeScalars
        check(!id.contains("\0") && !id.contains("\r") && !id.contains("\n"), "sse", "\(Array(data)) gave the last event ID \(whole.lastEventID.debugDescription)")
    }

    /// What a stream gave, whole: its events, whether it ended too large, and the parser's state.
    struct SSEOutcome: Equatable, CustomStringConvertible {
        var events: [ServerSentEvent] = []
        var tooLarge = false
        var lastEventID = ""
        var retry: Duration?
        var comments = 0

        var description: String { "\(events.count) events \(events.suffix(3)), tooLarge \(tooLarge), id \(lastEventID.debugDescription), retry \(String(describing: retry)), \(comments) comments" }
    }

    static func sseOutcome(_ chunks: [Data], limit: Int) -> SSEOutcome {
        var parser = ServerSentEventParser(maximumEventSize: limit)
        var outcome = SSEOutcome()
        do {
            for chunk in chunks { try parser.parse(chunk) { outcome.events.append($0) } }
        } catch {
            check(error.code == .tooLarge, "sse", "threw \(error)")
            outcome.tooLarge = true
        }
        parser.finish()
        (outcome.lastEventID, outcome.retry, outcome.comments) = (parser.lastEventID, parser.reconnectionTime, parser.commentCount)
        return outcome
    }
}
