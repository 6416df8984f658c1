import Foundation
import Hummingbird
import NIOCore

extension FaultRoutes {
    /// ``DemoServer/Fault/feed(items:chunkBytes:tails:declaresLength:)``: an
    /// RSS feed written in small chunks, ending as the request's turn says.
    static func addFeed(to router: Router<DemoRequestContext>, state: ServerState) {
        router.get("/faults/feed") { request, _ in
            let query = request.uri.queryParameters
            let items = max(0, min(query.get("items", as: Int.self) ?? 100, 1_000_000))
            let chunkBytes = max(1, query.get("chunk", as: Int.self) ?? 512)
            let tails = (query.get("tails").map { String($0) } ?? "").split(separator: ",").compactMap { DemoServer.FeedTail(rawValue: String($0)) }
            // The request log has counted this request already (its middleware runs first).
            let arrival = max(1, state.requestLog.entry(for: "/faults/feed")?.count ?? 1)
            let tail = tails.isEmpty ? .complete : tails[min(arrival, tails.count) - 1]
            let document = Array(feedDocument(items: items, version: arrival, malformedTail: tail == .malformed).utf8)
            let sent = tail == .truncated ? document.count / 2 : document.count
            var headers: HTTPFields = [.contentType: "application/rss+xml"]
            if query.get("chunked") == nil { headers[.contentLength] = "\(document.count)" }
            return Response(status: .ok, headers: headers, body: .init { writer in
                var offset = 0
                while offset < sent {
                    if tail == .pausedHalfway, offset < sent / 2, offset + chunkBytes >= sent / 2 {
                        try await writer.write(ByteBuffer(bytes: document[offset..<sent / 2]))
                        offset = sent / 2
                        try await state.gates.wait(DemoServer.FeedTail.halfwayGate)
                        continue
                    }
                    let end = min(sent, offset + chunkBytes)
                    try await writer.write(ByteBuffer(bytes: document[offset..<end]))
                    offset = end
                }
                if tail == .truncated { throw DeliberateReset() }
                try await writer.finish(nil)
            })
        }
    }

    /// RSS 2.0 with `items` items (guid `item-N`, a title with text beyond
    /// ASCII, so chunks split characters, ending with `v` and `version`); a
    /// malformed tail adds an item with a bare `&` before the end.
    static func feedDocument(items: Int, version: Int, malformedTail: Bool) -> String {
        var xml = #"<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Chunked</title>"#
        xml += "\n"
        for index in 0..<items {
            xml += "<item><guid isPermaLink=\"false\">item-\(index)</guid><title>Café ☕ número \(index) v\(version)</title><link>/items/\(index)</link></item>\n"
        }
        if malformedTail { xml += "<item><title>Fish & Chips</title></item>\n" }
        return xml + "</channel></rss>\n"
    }
}
