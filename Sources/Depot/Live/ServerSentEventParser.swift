import Foundation

/// Reads a `text/event-stream` body, chunk by chunk, into ``ServerSentEvent``s,
/// following WHATWG HTML's "Interpreting an event stream" (§9.2.6) exactly.
///
/// For example:
///
/// ```swift
/// var parser = ServerSentEventParser()
/// for try await chunk in response.body {
///     for event in try parser.parse(chunk) {
///         print(event.type, event.data)
///     }
/// }
/// parser.finish()                       // an event the stream cut off is discarded
/// let resumeFrom = parser.lastEventID   // send it as Last-Event-ID when reconnecting
/// ```
///
/// What it does, rule by rule: lines end with LF, CR or CRLF, and a CR at the
/// end of one chunk followed by an LF at the start of the next is one line
/// end; one UTF-8 byte order mark is stripped at the very start of the stream
/// (even when split across chunks), nowhere else; a line that starts with `:`
/// is a comment (counted in ``commentCount``: servers send them as
/// heartbeats); a line with no colon is a field name with an empty value; one
/// space after the colon is stripped, only one; `data` lines are joined with
/// `"\n"`; a blank line dispatches the event, unless no `data` came, which
/// dispatches nothing but still forgets the event type; `retry` counts only
/// when its value is all ASCII digits (milliseconds); an `id` whose value
/// contains NUL is ignored; other fields are ignored; the last event ID
/// persists from event to event; an event the stream cut off before its
/// blank line is discarded (``finish()``). Each line is decoded as UTF-8,
/// with U+FFFD for invalid bytes.
///
/// Why not mattt/EventSource 1.1.1: its parser is an actor called once per
/// byte, accepts `+5` as a retry, and strips a BOM at the start of any line.
/// This parser is a plain value that scans each chunk for line ends and
/// copies only a line that spans chunks.
///
/// Memory is bounded by ``maximumEventSize``: a line, together with what the
/// pending event has gathered, past it throws ``DepotError/Code/tooLarge``.
public struct ServerSentEventParser: Sendable {
    /// The default bound on one event: 1 MiB.
    public static let defaultMaximumEventSize = 1 << 20

    /// The most bytes one line plus the pending event's `data` and `event` may hold.
    public let maximumEventSize: Int

    /// The stream's last event ID: what to send as `Last-Event-ID` when
    /// reconnecting; `""` for none (then send no header). It changes when an
    /// event is dispatched (a blank line), to the latest `id` value seen on the
    /// stream, so an `id` in an event the stream cut off does not count.
    public private(set) var lastEventID = ""

    /// The reconnection time the server asked for with `retry`, or `nil` while it has not.
    public private(set) var reconnectionTime: Duration?

    /// How many comment lines (`:` first) have been read: servers send them as
    /// heartbeats, so a count that moves says the connection is alive.
    public private(set) var commentCount = 0

    /// The current line's bytes, when it spans chunks.
    private var line: [UInt8] = []
    /// The data buffer: each `data` value followed by an LF.
    private var data: [UInt8] = []
    /// The event type buffer.
    private var eventType: [UInt8] = []
    /// The last event ID buffer: the latest `id`, committed to ``lastEventID`` at a blank line.
    private var idBuffer = ""
    /// Whether the last byte read was a CR that ended a line (an LF right after it is part of that end).
    private var afterCR = false
    /// How many bytes of the BOM the stream has started with so far; `nil` once past the start.
    private var bomMatched: Int? = 0
    /// The error that stopped this stream; thrown again until ``finish()``.
    private var failure: DepotError?

    /// Makes a parser for one stream.
    ///
    /// For example: `var parser = ServerSentEventParser(maximumEventSize: 64 * 1024)`.
    ///
    /// - Parameter maximumEventSize: The most bytes one line, plus the data and
    ///   event type the pending event has gathered, may take
    ///   (``defaultMaximumEventSize``, 1 MiB); past it, ``parse(_:)`` throws ``DepotError/Code/tooLarge``.
    public init(maximumEventSize: Int = ServerSentEventParser.defaultMaximumEventSize) {
        self.maximumEventSize = max(0, maximumEventSize)
    }

    /// Reads the next chunk of the stream and returns the events it completed, in order.
    ///
    /// For example:
    ///
    /// ```swift
    /// var parser = ServerSentEventParser()
    /// _ = try parser.parse(Data("data: hel".utf8))        // []
    /// let events = try parser.parse(Data("lo\n\n".utf8))  // [ServerSentEvent(data: "hello")]
    /// ```
    ///
    /// - Parameter chunk: The next bytes of the body, cut anywhere.
    /// - Returns: The events dispatched by this chunk.
    /// - Throws: ``DepotError/Code/tooLarge`` when a line, with the pending
    ///   event, passes ``maximumEventSize``. The stream is then over: every
    ///   later call throws the same error until ``finish()``.
    public mutating func parse(_ chunk: Data) throws(DepotError) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        try parse(chunk) { events.append($0) }
        return events
    }

    /// Reads the next chunk of the stream and hands each event it completes to
    /// `onEvent`, in order, without gathering them in an array.
    ///
    /// For example:
    ///
    /// ```swift
    /// var count = 0
    /// try parser.parse(chunk) { _ in count += 1 }
    /// ```
    ///
    /// - Parameters:
    ///   - chunk: The next bytes of the body, cut anywhere.
    ///   - onEvent: Called once per event, before the next line is read.
    /// - Throws: As ``parse(_:)``; the events before the line that was too large have been handed over.
    public mutating func parse(_ chunk: Data, onEvent: (ServerSentEvent) -> Void) throws(DepotError) {
        if let failure { throw failure }
        let result = chunk.withUnsafeBytes { bytes in
            Result { () throws(DepotError) in try scan(bytes, onEvent) }
        }
        do {
            try result.get()
        } catch {
            failure = error
            line = []
            data = []
            eventType = []
            throw error
        }
    }

    /// Ends the stream: the event it cut off (no blank line yet) and any
    /// partial line are discarded, never dispatched.
    ///
    /// The parser may then read the next stream, a reconnection: as the
    /// standard has it for a new stream, its buffers start empty (the `id`
    /// of the cut-off event is forgotten, so an event without `id` on the new
    /// stream has the last event ID `""`) and a BOM may start it again;
    /// ``lastEventID``, ``reconnectionTime`` and ``commentCount`` carry over.
    ///
    /// For example:
    ///
    /// ```swift
    /// _ = try parser.parse(Data("id: 9\ndata: cut off".utf8))
    /// parser.finish()   // nothing dispatched; parser.lastEventID is unchanged
    /// ```
    public mutating func finish() {
        line = []
        data = []
        eventType = []
        idBuffer = ""
        afterCR = false
        bomMatched = 0
        failure = nil
    }
}

extension ServerSentEventParser {
    private static let lf = UInt8(ascii: "\n")
    private static let cr = UInt8(ascii: "\r")
    private static let colon = UInt8(ascii: ":")
    private static let space = UInt8(ascii: " ")
    private static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// Reads `bytes`: the BOM at the stream's start, then lines; only this throws.
    private mutating func scan(_ bytes: UnsafeRawBufferPointer, _ onEvent: (ServerSentEvent) -> Void) throws(DepotError) {
        let count = bytes.count
        var index = 0
        if var matched = bomMatched {
            while index < count, matched < 3, bytes[index] == Self.bom[matched] {
                matched += 1
                index += 1
            }
            if matched == 3 {
                bomMatched = nil
            } else if index == count {
                bomMatched = matched
                return
            } else {
                // Not a BOM: the bytes taken for one start the first line (never CR or LF).
                bomMatched = nil
                line.append(contentsOf: Self.bom[..<matched])
            }
        }
        if afterCR, index < count {
            afterCR = false
            if bytes[index] == Self.lf { index += 1 }
        }
        while index < count {
            var end = index
            while end < count {
                let byte = bytes[end]
                if byte == Self.lf || byte == Self.cr { break }
                end += 1
            }
            try checkSize(line.count + end - index)
            if end == count {
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<count]))
                return
            }
            if line.isEmpty {
                process(UnsafeRawBufferPointer(rebasing: bytes[index..<end]), onEvent)
            } else {
                line.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<end]))
                var complete: [UInt8] = []
                swap(&complete, &line)
                complete.withUnsafeBytes { process($0, onEvent) }
                complete.removeAll(keepingCapacity: complete.capacity <= 4096)
                swap(&complete, &line)
            }
            if bytes[end] == Self.cr {
                if end + 1 == count {
                    afterCR = true
                } else if bytes[end + 1] == Self.lf {
                    end += 1
                }
            }
            index = end + 1
        }
    }

    /// Throws when a line of `lineLength` bytes would take the pending event past the bound.
    private func checkSize(_ lineLength: Int) throws(DepotError) {
        if lineLength + data.count + eventType.count > maximumEventSize {
            throw DepotError(.tooLarge, detail: "a server-sent event over the limit of \(maximumEventSize) bytes")
        }
    }

    /// One line, without its line end.
    private mutating func process(_ line: UnsafeRawBufferPointer, _ onEvent: (ServerSentEvent) -> Void) {
        guard let first = line.first else { return dispatch(onEvent) }
        if first == Self.colon {
            commentCount += 1
            return
        }
        var colon = 0
        while colon < line.count, line[colon] != Self.colon { colon += 1 }
        var valueStart = min(colon + 1, line.count)
        if valueStart < line.count, line[valueStart] == Self.space { valueStart += 1 }
        let name = UnsafeRawBufferPointer(rebasing: line[..<colon])
        let value = UnsafeRawBufferPointer(rebasing: line[valueStart...])
        if Self.equals(name, "data") {
            data.append(contentsOf: value)
            data.append(Self.lf)
        } else if Self.equals(name, "event") {
            eventType.removeAll(keepingCapacity: true)
            eventType.append(contentsOf: value)
        } else if Self.equals(name, "id") {
            if !value.contains(0) { idBuffer = String(decoding: value, as: UTF8.self) }
        } else if Self.equals(name, "retry") {
            if let milliseconds = Self.digits(value) { reconnectionTime = .milliseconds(milliseconds) }
        }
    }

    /// A blank line: the pending event goes out, if it has data.
    private mutating func dispatch(_ onEvent: (ServerSentEvent) -> Void) {
        lastEventID = idBuffer
        guard !data.isEmpty else {
            eventType.removeAll(keepingCapacity: true)
            return
        }
        // The data buffer always ends with the LF its last line added: drop it.
        let text = data.withUnsafeBufferPointer { String(decoding: $0.dropLast(), as: UTF8.self) }
        let type = eventType.isEmpty ? "message" : String(decoding: eventType, as: UTF8.self)
        data.removeAll(keepingCapacity: data.capacity <= 64 * 1024)
        eventType.removeAll(keepingCapacity: true)
        onEvent(ServerSentEvent(type: type, data: text, lastEventID: lastEventID))
    }

    /// Whether `bytes` spell `name` (ASCII).
    private static func equals(_ bytes: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        guard bytes.count == name.utf8CodeUnitCount else { return false }
        let spelled = UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        return bytes.elementsEqual(spelled)
    }

    /// The number `bytes` spell when they are one or more ASCII digits (saturating), else `nil`.
    private static func digits(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        guard !bytes.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowAgain) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            value = overflow || overflowAgain ? .max : sum
        }
        return value
    }
}
