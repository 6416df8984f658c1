import Foundation
import Hummingbird
import NIOCore

/// The connection is closed on purpose.
struct DeliberateReset: Error {}

/// The routes of ``DemoServer/Fault``: broken, slow, hostile and scripted answers.
enum FaultRoutes {
    /// Every fault path starts with this.
    static let prefix = "/faults/"

    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        addScripted(to: router, state: state)
        addFeed(to: router, state: state)
        addCacheHeaders(to: router)
        router.get("/faults/status/:code") { request, context in
            let code = try context.parameters.require("code", as: Int.self)
            guard (100...599).contains(code) else { return text(.badRequest, "status must be 100...599") }
            let given = request.uri.queryParameters.get("body").map { $0.removingPercentEncoding ?? String($0) }
            let body = [204, 304].contains(code) || code < 200 ? "" : given ?? "status \(code)"
            return text(.init(code: code), body)
        }
        router.get("/faults/retry-after/:seconds") { request, context in
            let seconds = try context.parameters.require("seconds", as: Int.self)
            let value = request.uri.queryParameters.get("date") != nil
                ? NerdfeedRoutes.httpDate(state.now.addingTimeInterval(Double(seconds)))
                : "\(seconds)"
            var response = text(.serviceUnavailable, "try again later")
            response.headers[.retryAfter] = value
            return response
        }
        router.get("/faults/redirect-loop") { request, _ in
            Response(status: .found, headers: [.location: "/faults/redirect-loop" + query(of: request)])
        }
        router.get("/faults/redirects/:count") { request, context in
            let count = try context.parameters.require("count", as: Int.self)
            let next = count <= 1 ? DemoServer.Fault.hello.path : DemoServer.Fault.redirects(count - 1).path
            return Response(status: .found, headers: [.location: next + query(of: request)])
        }
        router.get("/faults/redirect/cross-origin") { _, _ in
            let port = state.crossOriginPort.withLock { $0 }
            return Response(status: .found, headers: [.location: "http://\(state.configuration.host):\(port)/echo/headers"])
        }
        router.get("/faults/redirect/https-to-http") { _, _ in
            Response(status: .found, headers: [.location: "http://\(state.configuration.host):\(state.boundPort.withLock { $0 })/forum/rss"])
        }
        router.get("/faults/drip") { request, _ in
            let bytes = max(0, min(request.uri.queryParameters.get("bytes", as: Int.self) ?? 10, 100_000))
            let ms = max(1, request.uri.queryParameters.get("ms", as: Int.self) ?? 100)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream", .contentLength: "\(bytes)"], body: .init { writer in
                for _ in 0..<bytes {
                    try await state.sleep(for: .milliseconds(ms))
                    try await writer.write(ByteBuffer(string: "."))
                }
                try await writer.finish(nil)
            })
        }
        router.get("/faults/reset-mid-body") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/octet-stream", .contentLength: "2048"], body: .init { writer in
                try await writer.write(ByteBuffer(repeating: UInt8(ascii: "r"), count: 1024))
                throw DeliberateReset()
            })
        }
        router.get("/faults/truncated") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/octet-stream", .contentLength: "1000"], body: .init { writer in
                try await writer.write(ByteBuffer(repeating: UInt8(ascii: "t"), count: 100))
                throw DeliberateReset()
            })
        }
        router.get("/faults/huge") { _, _ in
            let chunk = ByteBuffer(repeating: UInt8(ascii: "h"), count: 16 * 1024)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init { writer in
                // Paced at 16 KB per millisecond of real time: Hummingbird buffers writes
                // without waiting for the socket, so an unpaced loop would fill memory.
                let clock = ContinuousClock()
                do {
                    while !state.isStopping {
                        try await writer.write(chunk)
                        try await clock.sleep(for: .milliseconds(1))
                    }
                } catch {
                    // The client went away mid-body: tests wait for this.
                    state.requestLog.recordAbandoned(path: DemoServer.Fault.huge.path)
                    throw error
                }
                try await writer.finish(nil)
            })
        }
        router.get("/faults/malformed-json") { request, _ in
            let items = max(0, min(request.uri.queryParameters.get("items", as: Int.self) ?? 500, 100_000))
            var body = "["
            for index in 0..<items {
                body += #"{"id":\#(index),"title":"Item \#(index)"},"#
            }
            body += #"{"id": oops"#
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.get("/faults/malformed-xml") { _, _ in
            // A bare ampersand, a mismatched end tag, and no end to the document.
            xml(#"<?xml version="1.0"?><rss version="2.0"><channel><title>Fish & Chips</title><item><title>Unclosed</item>"#)
        }
        router.get("/faults/hostile-text") { _, _ in
            // Well-formed XML (XML forbids a raw ESC, even as &#x1b;): the
            // escapes arrive once the reader decodes the text's own entities.
            let items = [
                (#"Clear &amp;#x1b;[2J the screen"#, "reader", "double-encoded"),
                (#"<![CDATA[Retitle &#x1b;]0;pwned&#x7; the window]]>"#, "reader", "in CDATA"),
                (#"C1 &#x9b;31m CSI"#, "reader", "C1"),
                (#"An author"#, #"&amp;#x1b;[31mEvil&amp;#x1b;[0m"#, "author"),
                (#"A summary"#, "reader", #"&#x202e;gpj.exe &amp;#x8;&amp;#xd;overwritten"#),
            ]
            var body = #"<?xml version="1.0"?><rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><channel><title>Hostile</title>"#
            for (index, item) in items.enumerated() {
                body += "<item><title>\(item.0)</title><dc:creator>\(item.1)</dc:creator><description>\(item.2)</description>"
                body += "<link>http://hostile.example/\(index)</link><pubDate>Mon, 23 Nov 2026 10:0\(index):00 GMT</pubDate></item>"
            }
            return xml(body + "</channel></rss>")
        }
        router.get("/faults/xml-billion-laughs") { _, _ in
            var doctype = #"<!DOCTYPE lolz [<!ENTITY lol "lol">"#
            doctype += #"<!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">"#
            for level in 2...9 {
                let previous = "&lol\(level - 1);"
                doctype += "<!ENTITY lol\(level) \"\(String(repeating: previous, count: 10))\">"
            }
            doctype += "]>"
            return xml(#"<?xml version="1.0"?>"# + doctype + "<rss version=\"2.0\"><channel><title>&lol9;</title></channel></rss>")
        }
        router.get("/faults/xml-external-entity") { _, _ in
            xml(#"<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY secret SYSTEM "file:///etc/passwd">]><rss version="2.0"><channel><title>&secret;</title></channel></rss>"#)
        }
        router.get("/faults/wrong-content-type") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: #"{"feed":{"entry":[]}}"#)))
        }
        router.get("/faults/bytes/:count") { request, context in
            let count = try context.parameters.require("count", as: Int.self)
            guard (0...(50 << 20)).contains(count) else { return text(.badRequest, "count must be 0...52428800") }
            let support = request.uri.queryParameters.get("ranges").flatMap { DemoServer.ByteRangeSupport(rawValue: String($0)) } ?? .honoured
            let body = ByteBuffer(repeating: UInt8(ascii: "b"), count: count)
            var headers: HTTPFields = [.contentType: "application/octet-stream"]
            switch support {
            case .honoured, .untagged: headers[.eTag] = "\"b\(count)\""
            case .changing: headers[.eTag] = "\"b\(count)-\(UInt64.random(in: 0 ... .max))\""
            case .ignored: return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
            }
            var response = ByteRanges.response(to: request, body: body, headers: headers)
            if support == .untagged { response.headers[.eTag] = nil }
            return response
        }
        router.get("/faults/last-modified-only") { request, _ in
            let count = min(max(request.uri.queryParameters.get("count", as: Int.self) ?? 10, 0), 10_000)
            let modified = state.configuration.epoch
            var headers: HTTPFields = [.lastModified: NerdfeedRoutes.httpDate(modified)]
            if let since = request.headers[.ifModifiedSince], let date = NerdfeedRoutes.parseHTTPDate(since),
               floor(modified.timeIntervalSince1970) <= date.timeIntervalSince1970 {
                return Response(status: .notModified, headers: headers)
            }
            headers[.contentType] = "application/json"
            let body = "[" + (0..<count).map { "\($0 + 1)" }.joined(separator: ",") + "]"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
        }
        router.get("/faults/empty") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json", .contentLength: "0"])
        }
    }

    /// The request's query with its `?`, or nothing: what a redirect passes on.
    static func query(of request: Request) -> String {
        request.uri.query.map { "?" + $0 } ?? ""
    }

    static func text(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func xml(_ body: String) -> Response {
        Response(status: .ok, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
