import Foundation

/// What an operation asks the network for: method, path or URL, query, headers and body.
///
/// Build one with the static helpers:
///
/// ```swift
/// let list = NetworkRequest.get("/contacts", query: ["page": "2"])
/// let post = NetworkRequest.post("/posts", json: NewPost(text: "hello"))
/// let form = NetworkRequest.put("/tasks/7/complete", form: ["done": "1"])
/// ```
///
/// A path extends the controller's base URL, with or without a leading slash,
/// as in Alamofire and Moya: with the base `https://host/api`, `.get("contacts")`
/// and `.get("/contacts")` both request `https://host/api/contacts`. A query
/// in the path is kept, `..` segments resolve as RFC 3986 says, and a full
/// URL (`.get("https://other/x")`) replaces the base. See
/// ``resolvedURL(baseURL:)`` for the whole table.
public struct NetworkRequest: Sendable {
    /// Where the request goes. Frozen on purpose: a path or a URL.
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
    public var method: NetworkRequest.Method
    /// The path or URL.
    public var target: Target
    /// Query items, appended to the URL in order.
    public var query: [URLQueryItem]
    /// Headers for this request; adapters may add more.
    public var headers: HeaderFields
    /// The body, if any.
    public var body: Body?

    /// Makes a request. Prefer the static helpers such as ``get(_:query:headers:)``.
    public init(method: NetworkRequest.Method, target: Target, query: [URLQueryItem] = [], headers: HeaderFields = [:], body: Body? = nil) {
        self.method = method
        self.target = target
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// A GET of a path that extends the base URL (a leading slash changes
    /// nothing), or of a full URL given as text.
    public static func get(_ path: String, query: KeyValuePairs<String, String> = [:], headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .get, target: .path(path), query: query.map { URLQueryItem(name: $0.key, value: $0.value) }, headers: headers)
    }

    /// A GET of an absolute URL, such as a `file://` fixture or another host.
    public static func get(_ url: URL, headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .get, target: .url(url), headers: headers)
    }

    /// A POST with a JSON body.
    public static func post<T: Encodable & Sendable>(_ path: String, json: T, headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .post, target: .path(path), headers: headers, body: .json(json))
    }

    /// A POST with a form body.
    public static func post(_ path: String, form: KeyValuePairs<String, String>, headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .post, target: .path(path), headers: headers, body: .form(form))
    }

    /// A PUT with a JSON body.
    public static func put<T: Encodable & Sendable>(_ path: String, json: T, headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .put, target: .path(path), headers: headers, body: .json(json))
    }

    /// A PUT with a form body, or none.
    public static func put(_ path: String, form: KeyValuePairs<String, String>? = nil, headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .put, target: .path(path), headers: headers, body: form.map { .form($0) })
    }

    /// A PATCH with a JSON body.
    public static func patch<T: Encodable & Sendable>(_ path: String, json: T, headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .patch, target: .path(path), headers: headers, body: .json(json))
    }

    /// A DELETE.
    public static func delete(_ path: String, headers: HeaderFields = [:]) -> NetworkRequest {
        NetworkRequest(method: .delete, target: .path(path), headers: headers)
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
