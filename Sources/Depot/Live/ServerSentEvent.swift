/// One event of a `text/event-stream` body, as ``ServerSentEventParser`` dispatches it.
///
/// For example:
///
/// ```swift
/// var parser = ServerSentEventParser()
/// let events = try parser.parse(Data("event: score\nid: 7\ndata: 3-1\n\n".utf8))
/// // [ServerSentEvent(type: "score", data: "3-1", lastEventID: "7")]
/// ```
public struct ServerSentEvent: Sendable, Hashable, CustomStringConvertible {
    /// The event's type: the last `event` field's value, or `"message"` when the
    /// event had none (or an empty one), as WHATWG HTML's `MessageEvent.type`.
    public var type: String
    /// The `data` fields' values joined with `"\n"`. Never `nil`: an event with
    /// no `data` field is never dispatched; `data` with an empty value gives `""`.
    public var data: String
    /// The stream's last event ID as of this event: the value of the latest `id`
    /// field seen so far on the stream, in this event or an earlier one (an `id`
    /// persists across events), or `""` when none was ever sent or the server
    /// cleared it with an empty `id`. This is WHATWG HTML's `lastEventId`: a
    /// plain string, because the standard does not tell "never set" from
    /// "set to empty": either way a reconnection sends no `Last-Event-ID`.
    public var lastEventID: String

    /// Makes an event.
    ///
    /// For example: `ServerSentEvent(data: "hello")` is what `data: hello` and a blank line give.
    ///
    /// - Parameters:
    ///   - type: The event type (`"message"`).
    ///   - data: The data.
    ///   - lastEventID: The last event ID as of this event (`""`: none).
    public init(type: String = "message", data: String, lastEventID: String = "") {
        self.type = type
        self.data = data
        self.lastEventID = lastEventID
    }

    public var description: String {
        "\(type)(\(data.debugDescription)\(lastEventID.isEmpty ? "" : ", id \(lastEventID.debugDescription)"))"
    }
}
