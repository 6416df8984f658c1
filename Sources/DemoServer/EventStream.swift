import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Serves a ``ChangeFeed`` as server-sent events (`GET /timeline/events`,
/// `GET /crm/events`): a response body that stays open and carries one event
/// per change.
///
/// Each change is sent as
///
/// ```text
/// id: 31
/// event: post
/// data: {"author":"you","avatar":"/avatars/1.png","id":31,"text":"Hello"}
///
/// ```
///
/// With a `Last-Event-ID: N` request header the stream first sends every kept
/// change after N, then live ones; without it, only changes made after the
/// request arrived. When N cannot be resumed from (older than what the feed
/// keeps, greater than its latest number, or not a number) the stream sends
/// `id: C`, `event: reset`, `data: {"cursor":C}` with C the latest number, and
/// goes on live from C. A `: keep-alive` comment line (and a blank line) goes
/// out every ``DemoServer/Configuration/heartbeatInterval`` of server time
/// while heartbeats are on (`POST /_control {"heartbeats": false}`).
///
/// Memory per stream is bounded: a stream reads the feed's shared ``ChangeLog``
/// in batches of ``batchLimit`` and writes with the connection's back-pressure,
/// so it holds one batch at most. A client so slow that the changes it has not
/// read yet fall out of the log is dropped: its response ends, and when it
/// reconnects with its `Last-Event-ID` it gets `reset`.
///
/// A stream ends when the server stops (its response finishes), and at
/// `POST /_control {"cutStreams": true}` (the connection closes at once). After
/// `{"cutStreamsMidEvent": true}` the next change event a stream sends is cut
/// in half (`id: N\nevent: post\ndata: {"au`, no blank line) and the connection
/// closes: the client must not apply it, and gets it again when it resumes
/// from its last complete event.
///
/// For example, on a route:
///
/// ```swift
/// router.get("/timeline/events") { request, context in
///     EventStream.response(to: request, context: context, feed: state.timeline, state: state)
/// }
/// ```
enum EventStream {
    /// The request header a client resumes with.
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
    /// The most changes a stream reads from the log, and holds, at once.
    static let batchLimit = 256
    /// The comment sent when a heartbeat is due.
    static let keepAlive = ": keep-alive\n\n"

    /// The streamed response for `request` on `feed`.
    static func response<Model, Change>(
        to request: Request,
        context: DemoRequestContext,
        feed: ChangeFeed<Model, Change>,
        state: ServerState
    ) -> Response {
        // The number current when the request arrived: what "after the connection opened" means.
        let opened = feed.sequence
        let cuts = state.streamCuts
        let lastID = request.headers[lastEventID]
        let channel = context.channel
        let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache"]
        return Response(status: .ok, headers: headers, body: .init { writer in
            let doorbell = Doorbell(interrupt: { channel.close(mode: .all, promise: nil) })
            let token = feed.subscribe(doorbell)
            defer { feed.unsubscribe(token) }
            // Cuts made after the request arrived but before the stream listened apply to it too.
            let missed = state.streamCuts.signals(since: cuts)
            let (cursor, preamble) = startingPoint(lastID: lastID, opened: opened, feed: feed)
            try await withThrowingTaskGroup(of: Void.self) { group in
                // A zero or negative interval means no keep-alives (rather than a busy loop).
                let interval = state.configuration.heartbeatInterval
                if interval > .zero {
                    group.addTask {
                        while true {
                            try await state.sleep(for: interval)
                            doorbell.ring(.heartbeat)
                        }
                    }
                }
                defer { group.cancelAll() }
                try await serve(feed: feed, state: state, doorbell: doorbell, cursor: cursor, preamble: preamble, missed: missed, writer: &writer)
            }
            try await writer.finish(nil)
        })
    }

    /// Where a stream starts: its cursor, and the reset event to send first, if any.
    private static func startingPoint<Model, Change>(lastID: String?, opened: Int, feed: ChangeFeed<Model, Change>) -> (cursor: Int, preamble: String) {
        guard let lastID else { return (opened, "") }
        let id = Int(lastID.trimmingCharacters(in: .whitespaces))
        return feed.read { _, log in
            if let id, log.canResume(after: id) { return (id, "") }
            return (log.sequence, resetEvent(cursor: log.sequence))
        }
    }

    /// Writes events until the server stops, the stream is cut, or the client falls too far behind.
    private static func serve<Model, Change>(
        feed: ChangeFeed<Model, Change>,
        state: ServerState,
        doorbell: Doorbell,
        cursor: Int,
        preamble: String,
        missed: Doorbell.Signals,
        writer: inout any ResponseBodyWriter
    ) async throws {
        var cursor = cursor
        var out = ByteBuffer(string: preamble)
        var signals: Doorbell.Signals = missed.union(.changed)
        var cutMidEvent = false
        while true {
            if signals.contains(.stop) || state.isStopping { break }
            if signals.contains(.cut) { throw DeliberateReset() }
            if signals.contains(.cutMidEvent) { cutMidEvent = true }
            if signals.contains(.heartbeat), state.heartbeatsEnabled { out.writeString(keepAlive) }
            var more = true
            while more {
                // Dropped changes the client has not read: drop the client (it resumes into a reset).
                guard let page = feed.changes(after: cursor, limit: batchLimit) else { return }
                for entry in page.changes {
                    let text = try event(entry)
                    if cutMidEvent {
                        out.writeBytes(Array(text.utf8.prefix(text.utf8.count / 2)))
                        try await writer.write(out)
                        throw DeliberateReset()
                    }
                    out.writeString(text)
                }
                cursor = page.cursor
                more = page.more
                if out.readableBytes > 0 {
                    try await writer.write(out)
                    out.clear()
                }
            }
            signals = await doorbell.wait()
        }
    }

    /// The text of one change event, blank line included.
    static func event<Change: FeedChange>(_ entry: ChangeLog<Change>.Entry) throws -> String {
        "id: \(entry.seq)\nevent: \(entry.change.event)\ndata: \(try entry.change.data())\n\n"
    }

    /// The text of the event that tells a client to start again from `cursor`.
    static func resetEvent(cursor: Int) -> String {
        "id: \(cursor)\nevent: reset\ndata: {\"cursor\":\(cursor)}\n\n"
    }
}
