import Foundation

/// An HTTP method. Methods are case-sensitive (RFC 9110 §9.1); the standard ones are upper case.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method token as sent, for example `GET`.
    public let rawValue: String
    /// A method with this exact token.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `GET`: read a resource.
    public static let get = HTTPMethod(rawValue: "GET")
    /// `HEAD`: read a resource's headers only.
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `POST`: create or submit.
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`: replace.
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `PATCH`: change part of a resource.
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `DELETE`: remove.
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `OPTIONS`: ask what the server allows.
    public static let options = HTTPMethod(rawValue: "OPTIONS")

    /// GET, HEAD, OPTIONS, PUT and DELETE are idempotent (RFC 9110 §9.2.2).
    public var isIdempotent: Bool {
        [.get, .head, .options, .put, .delete].contains(self)
    }

    public var description: String { rawValue }
}

/// What an operation asks the network for: method, path or URL, query, headers and body.
///
/// Build one with the static helpers:
///
/// ```swift
/// let list = Request.get("/contacts", query: ["page": "2"])
/// let post = Request.post("/posts", json: NewPost(text: "hello"))
/// let form = Request.put("/tasks/7/complete", form: ["done": "1"])
/// ```
///
/// A relative `path` is resolved against the controller's base URL.
public struct Request: Sendable {
    /// Where the request goes.
    public enum Target: Sendable, Hashable {
        /// A path resolved against the controller's base URL.
        case path(String)
        /// An absolute URL.
        case url(URL)
    }

    /// A request body.
    public struct Body: Sendable {
        let contentType: String?
        let encode: @Sendable () throws -> Data

        /// Raw bytes with a content type.
        public static func data(_ data: Data, contentType: String) -> Body {
            Body(contentType: contentType) { data }
        }

        /// A JSON body, encoded when the request is sent.
        ///
        /// The default encoder sorts keys, so the same value is always the same
        /// bytes: a retry with an `Idempotency-Key` must repeat its body exactly
        /// (servers reject a key reused with another body), and Foundation's
        /// key order can change from one encoding to the next.
        public static func json<T: Encodable & Sendable>(_ value: T, encoder: @escaping @Sendable () -> JSONEncoder = { Body.stableEncoder() }) -> Body {
            Body(contentType: "application/json") { try encoder().encode(value) }
        }

        /// A JSON encoder with sorted keys: one value, one byte sequence.
        public static func stableEncoder() -> JSONEncoder {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return encoder
        }

        /// An `application/x-www-form-urlencoded` body, fields in order.
        public static func form(_ fields: KeyValuePairs<String, String>) -> Body {
            let pairs = fields.map { ($0.key, $0.value) }
            return Body(contentType: "application/x-www-form-urlencoded") {
                Data(FormEncoding.encode(pairs).utf8)
            }
        }
    }

    /// The method.
    public var method: HTTPMethod
    /// The path or URL.
    public var target: Target
    /// Query items, appended to the URL in order.
    public var query: [URLQueryItem]
    /// Headers for this request; adapters may add more.
    public var headers: HTTPHeaders
    /// The body, if any.
    public var body: Body?

    /// Makes a request. Prefer the static helpers such as ``get(_:query:headers:)``.
    public init(method: HTTPMethod, target: Target, query: [URLQueryItem] = [], headers: HTTPHeaders = [:], body: Body? = nil) {
        self.method = method
        self.target = target
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// A GET of a path relative to the base URL.
    public static func get(_ path: String, query: KeyValuePairs<String, String> = [:], headers: HTTPHeaders = [:]) -> Request {
        Request(method: .get, target: .path(path), query: query.map { URLQueryItem(name: $0.key, value: $0.value) }, headers: headers)
    }

    /// A GET of an absolute URL, such as a `file://` fixture or another host.
    public static func get(_ url: URL, headers: HTTPHeaders = [:]) -> Request {
        Request(method: .get, target: .url(url), headers: headers)
    }

    /// A POST with a JSON body.
    public static func post<T: Encodable & Sendable>(_ path: String, json: T, headers: HTTPHeaders = [:]) -> Request {
        Request(method: .post, target: .path(path), headers: headers, body: .json(json))
    }

    /// A POST with a form body.
    public static func post(_ path: String, form: KeyValuePairs<String, String>, headers: HTTPHeaders = [:]) -> Request {
        Request(method: .post, target: .path(path), headers: headers, body: .form(form))
    }

    /// A PUT with a JSON body.
    public static func put<T: Encodable & Sendable>(_ path: String, json: T, headers: HTTPHeaders = [:]) -> Request {
        Request(method: .put, target: .path(path), headers: headers, body: .json(json))
    }

    /// A PUT with a form body, or none.
    public static func put(_ path: String, form: KeyValuePairs<String, String>? = nil, headers: HTTPHeaders = [:]) -> Request {
        Request(method: .put, target: .path(path), headers: headers, body: form.map { .form($0) })
    }

    /// A PATCH with a JSON body.
    public static func patch<T: Encodable & Sendable>(_ path: String, json: T, headers: HTTPHeaders = [:]) -> Request {
        Request(method: .patch, target: .path(path), headers: headers, body: .json(json))
    }

    /// A DELETE.
    public static func delete(_ path: String, headers: HTTPHeaders = [:]) -> Request {
        Request(method: .delete, target: .path(path), headers: headers)
    }

    /// The absolute URL, resolved against `baseURL` when the target is a path.
    ///
    /// - Throws: ``DepotError/Code/invalidRequest`` when the path is relative and there is no base URL.
    public func resolvedURL(baseURL: URL?) throws(DepotError) -> URL {
        // One resolution: preparing the shortcut would cost more than it saves.
        try resolvedURL(base: baseURL.map { BaseURL($0, shortcut: false) })
    }

    /// The same, against a base URL prepared once (the controller resolves every request).
    func resolvedURL(base prepared: BaseURL?) throws(DepotError) -> URL {
        let base: URL
        switch target {
        case .url(let url):
            base = url
        case .path(let path):
            if Self.hasSchemeSeparator(path), let absolute = URL(string: path), absolute.scheme != nil {
                base = absolute
            } else if let prepared {
                guard let joined = prepared.resolve(path) else {
                    throw DepotError(.invalidRequest, detail: "cannot resolve path \"\(path)\" against \(prepared.url)")
                }
                base = joined
            } else {
                throw DepotError(.invalidRequest, detail: "path \"\(path)\" is relative and the controller has no base URL")
            }
        }
        guard !query.isEmpty else { return base }
        guard var components = URLComponents(url: base, resolvingAgainstBaseURL: true) else {
            throw DepotError(.invalidRequest, detail: "bad URL \(base)")
        }
        components.percentEncodedQueryItems = (components.percentEncodedQueryItems ?? []) + query.map {
            URLQueryItem(name: FormEncoding.escape($0.name), value: $0.value.map(FormEncoding.escape))
        }
        guard let url = components.url else {
            throw DepotError(.invalidRequest, detail: "bad query for \(base)")
        }
        return url
    }
}

/// A base URL prepared for resolving many paths against it.
///
/// `URL(string:relativeTo:).absoluteURL` parses twice and builds the string in
/// between (about 2 µs, and it runs for every request). Most paths are plain
/// ("items/12", "/contacts"): for those the result is the base's directory (or
/// its root, for "/…") followed by the path, which RFC 3986 §5.2 resolution
/// gives too, so one concatenation and one parse do (about 0.5 µs). Anything
/// else goes the long way.
struct BaseURL: Sendable {
    /// The base, ending in "/" so that its last path segment is kept.
    let url: URL
    /// `url.absoluteString`, when the concatenation shortcut is sound for it.
    private let directory: String?
    /// Scheme and authority ("http://h:8080"), for paths that start with "/".
    private let root: String?

    /// - Parameter shortcut: Whether to prepare the concatenation shortcut
    ///   (worth it for a base that resolves many paths).
    init(_ url: URL, shortcut: Bool = true) {
        let directory = url.absoluteString.hasSuffix("/") ? url : url.appendingSlashIfNeeded()
        self.url = directory
        // A base with a query or fragment loses them in resolution, and one with
        // dot segments ("/v1/../v2/") has them removed: such bases, and any other
        // whose own text resolution would change, take the long way.
        let text = directory.absoluteString
        if shortcut, directory.query == nil, directory.fragment == nil, directory.scheme != nil, directory.host != nil,
           let rootURL = URL(string: "/", relativeTo: directory)?.absoluteString, rootURL.hasSuffix("/"),
           text.hasPrefix(rootURL),
           URL(string: "x", relativeTo: directory)?.absoluteString == text + "x" {
            self.directory = text
            self.root = String(rootURL.dropLast())
        } else {
            self.directory = nil
            self.root = nil
        }
    }

    /// `path` resolved against the base, or `nil` if it cannot be.
    func resolve(_ path: String) -> URL? {
        if let directory, let root, let prefix = Self.shortcutPrefix(for: path, directory: directory, root: root),
           let url = URL(string: prefix + path) {
            return url
        }
        return URL(string: path, relativeTo: url)?.absoluteURL
    }

    /// What to put before `path` when concatenation resolves it, else `nil`.
    ///
    /// The path may hold only unreserved characters, "/" and percent escapes
    /// ("%" and two hex digits); it may not start with "//"
    /// (another host) or hold a "." or ".." segment (which resolution removes).
    /// A first segment with ":" would be a scheme: ":" is not allowed at all.
    static func shortcutPrefix(for path: String, directory: String, root: String) -> String? {
        let bytes = path.utf8
        guard let first = bytes.first else { return nil }
        let prefix: String
        if first == UInt8(ascii: "/") {
            guard bytes.dropFirst().first != UInt8(ascii: "/") else { return nil }
            prefix = root
        } else {
            prefix = directory
        }
        // Segments are checked as they end; the path's end ends the last one.
        var segmentLength = 0
        var segmentIsDots = true
        var hexDigitsDue = 0  // after "%": a bad escape makes the parser re-encode every "%" in the URL
        for byte in bytes {
            if hexDigitsDue > 0 {
                guard byte.isHexDigit else { return nil }
                hexDigitsDue -= 1
                segmentLength += 1
                continue
            }
            if byte == UInt8(ascii: "%") {
                hexDigitsDue = 2
                segmentLength += 1
                segmentIsDots = false
                continue
            }
            if byte == UInt8(ascii: "/") {
                if segmentIsDots && segmentLength > 0 && segmentLength <= 2 { return nil }
                segmentLength = 0
                segmentIsDots = true
            } else if isUnreserved(byte) {
                segmentLength += 1
                if byte != UInt8(ascii: ".") { segmentIsDots = false }
            } else {
                return nil
            }
        }
        if hexDigitsDue > 0 || segmentIsDots && segmentLength > 0 && segmentLength <= 2 { return nil }
        return prefix
    }

    /// ALPHA, DIGIT, "-", ".", "_", "~" (RFC 3986 §2.3).
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}

extension Request {
    /// Whether `text` contains "://". A byte scan: this runs for every request,
    /// and `String.contains` takes about 0.4 µs through Foundation (4 µs
    /// through the standard library's generic search) against 20 ns here.
    static func hasSchemeSeparator(_ text: String) -> Bool {
        var matched = 0
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: ":"): matched = 1
            case UInt8(ascii: "/") where matched > 0:
                if matched == 2 { return true }
                matched = 2
            default: matched = 0
            }
        }
        return false
    }
}

extension URL {
    /// `URL(string: "a", relativeTo: "http://h/api")` drops `api`; a trailing slash keeps it.
    func appendingSlashIfNeeded() -> URL {
        let text = absoluteString
        if text.hasSuffix("/") { return self }
        return URL(string: text + "/") ?? self
    }
}

/// `application/x-www-form-urlencoded` encoding (WHATWG URL standard).
enum FormEncoding {
    private static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._*")

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved.union(CharacterSet(charactersIn: " ")))?
            .replacingOccurrences(of: " ", with: "+") ?? text
    }

    static func encode(_ pairs: [(String, String)]) -> String {
        pairs.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&")
    }
}

private extension UInt8 {
    var isHexDigit: Bool {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }
}
