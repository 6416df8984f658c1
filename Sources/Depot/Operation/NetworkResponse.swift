import Foundation

/// What came back: status, headers, the whole body and the final URL after redirects.
///
/// Operations receive it in ``NetworkOperation/process(_:context:)``:
///
/// ```swift
/// func process(_ response: NetworkResponse, context: OperationContext) async throws -> [Song] {
///     try response.decode(TopSongsFeed.self).feed.entry.map(Song.init)
/// }
/// ```
public struct NetworkResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The response headers.
    public var headers: HeaderFields
    /// The whole body; empty when it went to a ``StreamingNetworkOperation``'s sink instead.
    public var body: Data
    /// The URL that answered, after redirects.
    public var url: URL

    /// Makes a response. Useful for testing an operation's `process` directly.
    public init(status: Int, headers: HeaderFields = [:], body: Data = Data(), url: URL) {
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
    }

    /// Decodes the body as JSON.
    ///
    /// - Throws: `DecodingError`, which Depot reports as ``DepotError/Code/decoding``.
    public func decode<T: Decodable>(_ type: T.Type = T.self, using decoder: JSONDecoder = JSONDecoder()) throws -> T {
        try decoder.decode(T.self, from: body)
    }

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }
}
