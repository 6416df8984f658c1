import Foundation

extension DemoServer {
    /// The fault routes, typed so tests never spell paths by hand.
    ///
    /// ```swift
    /// let url = server.url(for: .status(503))
    /// let slow = server.url(for: .drip(bytes: 10, every: .milliseconds(100)))
    /// ```
    public enum Fault: Sendable, Hashable {
        /// Answers this status with `body` as text, or `status N` when `body` is
        /// `nil` (no body at all for 1xx, 204 and 304).
        case status(Int, body: String? = nil)
        /// 503 with `Retry-After` in seconds, or as an HTTP date when `asDate` is true.
        case retryAfter(seconds: Int, asDate: Bool = false)
        /// A redirect to itself, forever. The request's query goes along in `Location`.
        case redirectLoop
        /// `count` redirects (302) in a row, each to the next (`count - 1`), the
        /// last one to ``hello``. The request's query goes along in each `Location`.
        case redirects(Int)
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
        /// An endless chunked body, paced at 16 MB/s. A client that stops reading
        /// is recorded: see ``DemoServer/waitUntilAbandoned(_:)``.
        case huge
        /// JSON that is valid for `validItems` items and then broken.
        case malformedJSON(validItems: Int)
        /// An RSS feed of `items` items written `chunkBytes` at a time, under a
        /// `Content-Length` for the whole document unless `declaresLength` is
        /// false (then chunked). The n-th request to this route ends as
        /// `tails[n - 1]` says (the last one for every later request), and its
        /// titles end with `vn`, so each answer differs from the one before.
        case feed(items: Int, chunkBytes: Int, tails: [FeedTail] = [.complete], declaresLength: Bool = true)
        /// XML that is not well-formed: a bare `&`, a mismatched end tag, no end.
        case malformedXML
        /// A valid RSS feed whose titles, author and summary hold terminal
        /// escapes, double-encoded (`&amp;#x1b;`), in CDATA, as C1 controls,
        /// and bidi overrides: what a hostile feed sends.
        case hostileText
        /// An XML document whose nested entities expand to gigabytes.
        case xmlBillionLaughs
        /// An XML document that refers to an external entity (a local file).
        case xmlExternalEntity
        /// JSON labelled `text/html`.
        case wrongContentType
        /// 200 with an empty body.
        case empty
        /// `count` bytes of filler: a body of known size, for pacing checks,
        /// with a strong `ETag`. `ranges` says how the route answers a
        /// `Range` request.
        case bytes(Int, ranges: ByteRangeSupport = .honoured)
        /// A JSON array of the numbers 1 to `count`, dated by `Last-Modified`
        /// only (no `ETag`): a server that answers every `If-Modified-Since`
        /// at or after its date with 304, whatever the parameters.
        case lastModifiedOnly(count: Int)
        /// `{"message":"hello"}` (19 bytes of JSON): the smallest successful answer.
        case hello
        /// The request's headers as a JSON object of strings, names lower-cased.
        /// Every fault route also keeps them: see ``DemoServer/lastRequestHeaders(for:)``.
        case echoHeaders
        /// For POST and PUT: the request's method, `Content-Type` and body, as the
        /// JSON object `{"method": ..., "contentType": ..., "body": ...}`.
        case echoBody
        /// Holds the request until the test opens the gate `name` with
        /// ``DemoServer/openGate(_:)``, then answers as ``hello`` (GET) or
        /// ``echoBody`` (POST, PUT). Fails when the server stops first.
        case gated(String)
        /// Never answers, not even a status line, until the server stops.
        case hang
        /// ``hello`` with the strong `ETag` ``cacheHeadersETag`` and the caching
        /// headers given, each only when given: `Cache-Control` as written,
        /// `Age` in seconds, and `Expires` as ``ExpiresHeader`` says. A
        /// request whose `If-None-Match` names the `ETag` gets 304 with the
        /// same headers. `name` keeps one test's requests apart from another's
        /// in ``DemoServer/requestCount(for:)``.
        case cacheHeaders(_ name: String, cacheControl: String? = nil, age: Int? = nil, expires: ExpiresHeader? = nil)

        /// The path and query of this fault.
        public var path: String {
            switch self {
            case .status(let code, let body): return "/faults/status/\(code)" + (body.map { "?body=\(Self.encoded($0))" } ?? "")
            case .retryAfter(let seconds, let asDate): return "/faults/retry-after/\(seconds)" + (asDate ? "?date=1" : "")
            case .redirectLoop: return "/faults/redirect-loop"
            case .redirects(let count): return "/faults/redirects/\(count)"
            case .redirectCrossOrigin: return "/faults/redirect/cross-origin"
            case .redirectToHTTP: return "/faults/redirect/https-to-http"
            case .drip(let bytes, let every): return "/faults/drip?bytes=\(bytes)&ms=\(every.components.seconds * 1000 + every.components.attoseconds / 1_000_000_000_000_000)"
            case .resetMidBody: return "/faults/reset-mid-body"
            case .truncated: return "/faults/truncated"
            case .huge: return "/faults/huge"
            case .malformedJSON(let validItems): return "/faults/malformed-json?items=\(validItems)"
            case .feed(let items, let chunkBytes, let tails, let declaresLength):
                return "/faults/feed?items=\(items)&chunk=\(chunkBytes)&tails=\(tails.map(\.rawValue).joined(separator: ","))" + (declaresLength ? "" : "&chunked=1")
            case .malformedXML: return "/faults/malformed-xml"
            case .hostileText: return "/faults/hostile-text"
            case .xmlBillionLaughs: return "/faults/xml-billion-laughs"
            case .xmlExternalEntity: return "/faults/xml-external-entity"
            case .wrongContentType: return "/faults/wrong-content-type"
            case .empty: return "/faults/empty"
            case .bytes(let count, let ranges): return "/faults/bytes/\(count)" + (ranges == .honoured ? "" : "?ranges=\(ranges.rawValue)")
            case .lastModifiedOnly(let count): return "/faults/last-modified-only?count=\(count)"
            case .hello: return "/faults/hello"
            case .echoHeaders: return "/faults/echo/headers"
            case .echoBody: return "/faults/echo/body"
            case .gated(let name): return "/faults/gated/\(Self.encoded(name))"
            case .hang: return "/faults/hang"
            case .cacheHeaders(let name, let cacheControl, let age, let expires):
                var query: [String] = []
                if let cacheControl { query.append("cc=\(Self.encoded(cacheControl))") }
                if let age { query.append("age=\(age)") }
                switch expires {
                case .secondsAfterDate(let seconds): query.append("expiresIn=\(seconds)")
                case .verbatim(let text): query.append("expires=\(Self.encoded(text))")
                case nil: break
                }
                return "/faults/cache/\(Self.encoded(name))" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
            }
        }

        /// ``path`` up to its query: what ``DemoServer/requestCount(for:)`` counts by.
        var pathWithoutQuery: String {
            String(path.prefix { $0 != "?" })
        }

        /// Percent-encodes everything but the unreserved characters.
        private static func encoded(_ text: String) -> String {
            text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? text
        }
    }

    /// The `ETag` of every ``Fault/cacheHeaders(_:cacheControl:age:expires:)`` answer.
    public static let cacheHeadersETag = "\"cache-1\""

    /// The `Expires` of a ``Fault/cacheHeaders(_:cacheControl:age:expires:)`` answer.
    public enum ExpiresHeader: Sendable, Hashable {
        /// This many seconds after the response's `Date` (negative: before it).
        /// `Date` comes from the real clock (Hummingbird stamps it), so this does too.
        case secondsAfterDate(Int)
        /// This text as it is: a malformed date, `0`.
        case verbatim(String)
    }

    /// How ``Fault/bytes(_:ranges:)`` answers a `Range` request.
    public enum ByteRangeSupport: String, Sendable, Hashable {
        /// As RFC 9110 says: `206` with the bytes asked for, `If-Range` honoured.
        case honoured
        /// The whole body with `200`, as a server without range support.
        case ignored
        /// `206` without `ETag` or `Last-Modified`: pieces nobody can join safely.
        case untagged
        /// A new `ETag` on every request, as if the body changed each time.
        case changing
    }

    /// How a ``Fault/feed(items:chunkBytes:tails:declaresLength:)`` ends.
    public enum FeedTail: String, Sendable, Hashable {
        /// The whole document.
        case complete
        /// Half the declared bytes, then the connection is reset.
        case truncated
        /// A last item with a bare `&`: well-formed up to there.
        case malformed
        /// Half the document, then a wait at the gate ``FeedTail/halfwayGate``
        /// (``DemoServer/openGate(_:)``), then the rest: a body that a test
        /// holds in flight for as long as it needs.
        case pausedHalfway

        /// The gate a ``pausedHalfway`` answer waits at.
        public static let halfwayGate = "feed-halfway"
    }

    /// The URL of a fault route on this server.
    public func url(for fault: Fault) -> URL {
        URL(string: baseURL.absoluteString + fault.path)!
    }
}
