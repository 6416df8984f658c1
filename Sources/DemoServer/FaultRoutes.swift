import Foundation
import Hummingbird
import NIOCore

extension DemoServer {
    /// The fault routes, typed so tests never spell paths by hand.
    ///
    /// ```swift
    /// let url = server.url(for: .status(503))
    /// let slow = server.url(for: .drip(bytes: 10, every: .milliseconds(100)))
    /// ```
    public enum Fault: Sendable, Hashable {
        /// Answers this status with a short text body.
        case status(Int)
        /// 503 with `Retry-After` in seconds, or as an HTTP date when `asDate` is true.
        case retryAfter(seconds: Int, asDate: Bool = false)
        /// A redirect to itself, forever.
        case redirectLoop
        /// A redirect to the second listener (another port, so another origin), which
        /// records the headers it receives: see ``DemoServer/crossOriginHeaders``.
        case redirectCrossOrigin
        /// A redirect to a plain-http URL. Served over http here, so it exercises the
        /// https→http refusal only behind TLS or a transport stub.
        case redirectToHTTP
        /// `bytes` bytes, one every `every` of server time.
        case drip(bytes: Int, every: Duration)
        /// Half a declared body, then the connection is reset.
        case resetMidBody
        /// `Content-Length: 1000` with 100 bytes, then the connection closes.
        case truncated
        /// An endless chunked body, paced at 16 MB/s.
        case huge
        /// JSON that is valid for `validItems` items and then broken.
        case malformedJSON(validItems: Int)
        /// XML that is not well-formed: a bare `&`, a mismatched end tag, no end.
        case malformedXML
        /// An XML document whose nested entities expand to gigabytes.
        case xmlBillionLaughs
        /// An XML document that refers to an external entity (a local file).
        case xmlExternalEntity
        /// JSON labelled `text/html`.
        case wrongContentType
        /// 200 with an empty body.
        case empty
        /// `count` bytes of filler: a body of known size, for pacing checks.
        case bytes(Int)

        /// The path and query of this fault.
        public var path: String {
            switch self {
            case .status(let code): return "/faults/status/\(code)"
            case .retryAfter(let seconds, let asDate): return "/faults/retry-after/\(seconds)" + (asDate ? "?date=1" : "")
            case .redirectLoop: return "/faults/redirect-loop"
            case .redirectCrossOrigin: return "/faults/redirect/cross-origin"
            case .redirectToHTTP: return "/faults/redirect/https-to-http"
            case .drip(let bytes, let every): return "/faults/drip?bytes=\(bytes)&ms=\(every.components.seconds * 1000 + every.components.attoseconds / 1_000_000_000_000_000)"
            case .resetMidBody: return "/faults/reset-mid-body"
            case .truncated: return "/faults/truncated"
            case .huge: return "/faults/huge"
            case .malformedJSON(let validItems): return "/faults/malformed-json?items=\(validItems)"
            case .malformedXML: return "/faults/malformed-xml"
            case .xmlBillionLaughs: return "/faults/xml-billion-laughs"
            case .xmlExternalEntity: return "/faults/xml-external-entity"
            case .wrongContentType: return "/faults/wrong-content-type"
            case .empty: return "/faults/empty"
            case .bytes(let count): return "/faults/bytes/\(count)"
            }
        }
    }

    /// The URL of a fault route on this server.
    public func url(for fault: Fault) -> URL {
        URL(string: baseURL.absoluteString + fault.path)!
    }
}

/// The connection is closed on purpose.
struct DeliberateReset: Error {}

enum FaultRoutes {
    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        router.get("/faults/status/:code") { _, context in
            let code = try context.parameters.require("code", as: Int.self)
            guard (100...599).contains(code) else { return text(.badRequest, "status must be 100...599") }
            let body = [204, 304].contains(code) || code < 200 ? "" : "status \(code)"
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
        router.get("/faults/redirect-loop") { _, _ in
            Response(status: .found, headers: [.location: "/faults/redirect-loop"])
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
                while !state.isStopping {
                    try await writer.write(chunk)
                    try await clock.sleep(for: .milliseconds(1))
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
        router.get("/faults/bytes/:count") { _, context in
            let count = try context.parameters.require("count", as: Int.self)
            guard (0...(50 << 20)).contains(count) else { return text(.badRequest, "count must be 0...52428800") }
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "b"), count: count)))
        }
        router.get("/faults/empty") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json", .contentLength: "0"])
        }
    }

    static func text(_ status: HTTPResponse.Status, _ body: String) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    static func xml(_ body: String) -> Response {
        Response(status: .ok, headers: [.contentType: "application/xml"], body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

/// The second listener: another port, so another origin, that records what arrives.
enum EchoRoutes {
    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        router.get("/echo/headers") { request, _ in
            var headers: [String: String] = [:]
            for field in request.headers { headers[field.name.canonicalName] = field.value }
            state.crossOriginHeaders.withLock { $0 = headers }
            let data = try JSONEncoder.sorted.encode(headers)
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
    }
}
