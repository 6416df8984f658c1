import Foundation

/// Which header values and URL query parameters are secrets, and how to write
/// headers, URLs and messages with those secrets replaced by `<redacted>`.
///
/// A controller applies its ``NetworkController/Configuration/Observability/redaction`` to
/// everything it writes out: log lines, the ``DepotError``s it reports (and so
/// its events and notifications), and the operation names in its ``Trace``.
/// A redirect to another origin drops every secret header, whatever the list.
/// Names are compared without regard to case and kept lower-cased.
///
/// For example:
///
/// ```swift
/// var redaction = Redaction.default
/// redaction.headerNames.insert("X-Session")
/// redaction.queryParameters.insert("sig")
/// redaction.url(URL(string: "https://api.example.com/feed?sig=abc&page=2")!)
/// // "https://api.example.com/feed?sig=<redacted>&page=2"
/// ```
public struct Redaction: Sendable, Hashable {
    /// What a secret value is replaced with.
    static let placeholder = "<redacted>"

    private var names: Set<String>
    private var fragments: Set<String>
    private var parameters: Set<String>

    /// Header names whose values are secrets.
    ///
    /// For example: `redaction.headerNames.insert("X-Session")`.
    public var headerNames: Set<String> {
        get { names }
        set { names = Self.lowercased(newValue) }
    }

    /// Parts of header names that make a header secret: `"token"` covers
    /// `X-Auth-Token` and `X-CSRF-Token`.
    ///
    /// For example: `redaction.headerNameFragments.insert("password")`.
    public var headerNameFragments: Set<String> {
        get { fragments }
        set { fragments = Self.lowercased(newValue).subtracting([""]) }
    }

    /// Query (and fragment) parameter names whose values are secrets. The name stays,
    /// the value becomes `<redacted>`.
    ///
    /// For example: `redaction.queryParameters.insert("sig")`.
    public var queryParameters: Set<String> {
        get { parameters }
        set { parameters = Self.lowercased(newValue) }
    }

    /// Makes a redaction list; each list replaces the default one.
    ///
    /// For example:
    ///
    /// ```swift
    /// let strict = Redaction(headerNameFragments: ["token", "secret", "api-key", "session"])
    /// ```
    ///
    /// - Parameters:
    ///   - headerNames: Secret header names (`Authorization`, `Proxy-Authorization`,
    ///     `Cookie`, `Set-Cookie`, `X-API-Key`).
    ///   - headerNameFragments: A header whose name contains one of these is secret
    ///     (`token`, `secret`, `api-key`).
    ///   - queryParameters: Secret query parameters (`token`, `access_token`,
    ///     `api_key`, `key`, `signature`, `password`).
    public init(
        headerNames: Set<String> = ["Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-API-Key"],
        headerNameFragments: Set<String> = ["token", "secret", "api-key"],
        queryParameters: Set<String> = ["token", "access_token", "api_key", "key", "signature", "password"]
    ) {
        names = Self.lowercased(headerNames)
        fragments = Self.lowercased(headerNameFragments).subtracting([""])
        parameters = Self.lowercased(queryParameters)
    }

    /// The usual secrets: credentials and cookies in headers, and tokens, keys,
    /// signatures and passwords in queries (see ``init(headerNames:headerNameFragments:queryParameters:)``).
    ///
    /// For example: `NetworkController.Configuration(observability: .init(redaction: .default))`.
    public static let `default` = Redaction()

    /// Whether a header's value is a secret.
    ///
    /// For example: `Redaction.default.isSecret(headerName: "X-Auth-Token") // true`.
    ///
    /// - Parameter name: The header's name, in any case.
    public func isSecret(headerName name: String) -> Bool {
        let lowered = name.lowercased()
        return names.contains(lowered) || fragments.contains { lowered.contains($0) }
    }

    /// Whether a query parameter's value is a secret.
    ///
    /// For example: `Redaction.default.isSecret(queryParameter: "Access_Token") // true`.
    ///
    /// - Parameter name: The parameter's name, percent-encoded or not, in any case.
    public func isSecret(queryParameter name: String) -> Bool {
        guard !parameters.isEmpty else { return false }
        return parameters.contains((name.removingPercentEncoding ?? name).lowercased())
    }

    /// Header fields as text, `Name: value` joined by `, `, with secret values
    /// replaced by `<redacted>`.
    ///
    /// For example:
    ///
    /// ```swift
    /// Redaction.default.headers(["Accept": "text/html", "Cookie": "id=42"])
    /// // "Accept: text/html, Cookie: <redacted>"
    /// ```
    ///
    /// - Parameter fields: The headers to write.
    public func headers(_ fields: HeaderFields) -> String {
        fields.map { field in
            "\(field.name): \(isSecret(headerName: field.name) ? Self.placeholder : field.value)"
        }.joined(separator: ", ")
    }

    /// A URL as text, with the values of secret query and fragment parameters, and
    /// any password in it, replaced by `<redacted>`.
    ///
    /// For example:
    ///
    /// ```swift
    /// Redaction.default.url(URL(string: "https://ann:pw@example.com/a?token=t1&page=2")!)
    /// // "https://ann:<redacted>@example.com/a?token=<redacted>&page=2"
    /// ```
    ///
    /// - Parameter url: The URL to write.
    public func url(_ url: URL) -> String {
        scrub(url.absoluteString, inURL: true)
    }

    /// Free text, such as an error message, with the secrets of every URL or
    /// form-encoded list in it (`token=…`, `https://user:password@…`) replaced by
    /// `<redacted>`. Header values in free text are not recognised: write headers
    /// with ``headers(_:)``.
    ///
    /// For example:
    ///
    /// ```swift
    /// Redaction.default.text("refused: http://example.com/?key=k1 → https://example.com/")
    /// // "refused: http://example.com/?key=<redacted> → https://example.com/"
    /// ```
    ///
    /// - Parameter text: The text to write.
    public func text(_ text: String) -> String {
        scrub(text, inURL: false)
    }

    /// The error with its detail, body excerpt and the text of its underlying
    /// error redacted, so that its ``DepotError/description`` shows no secret.
    /// The underlying error itself is kept as it is (a `DepotError` one is redacted too).
    func error(_ error: DepotError) -> DepotError {
        var copy = error
        copy.detail = error.detail.map(text)
        copy.bodyExcerpt = error.bodyExcerpt.map(text)
        if let underlying = error.underlying {
            if let inner = underlying as? DepotError {
                copy.underlying = self.error(inner)
            } else {
                let raw = String(describing: underlying)
                let clean = text(raw)
                if clean != raw { copy.redactedUnderlying = clean }
            }
        }
        return copy
    }

    private static func lowercased(_ names: Set<String>) -> Set<String> {
        Set(names.map { $0.lowercased() })
    }

    // MARK: - The scanner

    /// `text` with secret parameter values and URL passwords replaced. In a URL a
    /// value runs to the next `&` or `#`; in free text also to white space, a
    /// quote or an angle bracket, and a parameter may also follow those.
    private func scrub(_ text: String, inURL: Bool) -> String {
        // Nothing to redact without a parameter or a user: the usual case costs one pass.
        guard text.utf8.contains(where: { $0 == Byte.equals || $0 == Byte.at }) else { return text }
        let bytes = Array(text.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + 16)
        var changed = false
        var i = 0
        // In free text a parameter may also begin at the start.
        var atNameStart = !inURL
        while i < bytes.count {
            let byte = bytes[i]
            // `scheme://user:password@host`: the password goes.
            if byte == Byte.colon, i + 2 < bytes.count, bytes[i + 1] == Byte.slash, bytes[i + 2] == Byte.slash {
                output.append(contentsOf: bytes[i ..< i + 3])
                i += 3
                var end = i
                while end < bytes.count, !Self.endsAuthority(bytes[end]) { end += 1 }
                if let at = bytes[i ..< end].lastIndex(of: Byte.at), let colon = bytes[i ..< at].firstIndex(of: Byte.colon) {
                    output.append(contentsOf: bytes[i ... colon])
                    output.append(contentsOf: Self.placeholder.utf8)
                    i = at
                    changed = true
                }
                atNameStart = false
                continue
            }
            if atNameStart, let (equals, valueEnd) = secretParameter(in: bytes, at: i, inURL: inURL) {
                output.append(contentsOf: bytes[i ... equals])
                output.append(contentsOf: Self.placeholder.utf8)
                i = valueEnd
                changed = true
                atNameStart = false
                continue
            }
            output.append(byte)
            atNameStart = Self.startsParameter(byte, inURL: inURL)
            i += 1
        }
        return changed ? String(decoding: output, as: UTF8.self) : text
    }

    /// If a secret parameter's name starts at `start`: the index of its `=` and
    /// the end of its value.
    private func secretParameter(in bytes: [UInt8], at start: Int, inURL: Bool) -> (equals: Int, valueEnd: Int)? {
        var equals = start
        while equals < bytes.count, bytes[equals] != Byte.equals {
            if Self.startsParameter(bytes[equals], inURL: inURL) || Self.endsValue(bytes[equals], inURL: inURL) { return nil }
            equals += 1
        }
        guard equals < bytes.count, equals > start,
              isSecret(queryParameter: String(decoding: bytes[start ..< equals], as: UTF8.self))
        else { return nil }
        var valueEnd = equals + 1
        while valueEnd < bytes.count, !Self.endsValue(bytes[valueEnd], inURL: inURL) { valueEnd += 1 }
        return (equals, valueEnd)
    }

    private enum Byte {
        static let equals = UInt8(ascii: "=")
        static let at = UInt8(ascii: "@")
        static let colon = UInt8(ascii: ":")
        static let slash = UInt8(ascii: "/")
    }

    /// Bytes after which a parameter name may start.
    private static func startsParameter(_ byte: UInt8, inURL: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "?"), UInt8(ascii: "&"), UInt8(ascii: "#"), UInt8(ascii: ";"): return true
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\""), UInt8(ascii: "("), UInt8(ascii: ","):
            return !inURL
        default: return false
        }
    }

    /// Bytes that end a value. Over-redacting is safe, so `)` and `'` do not end one.
    private static func endsValue(_ byte: UInt8, inURL: Bool) -> Bool {
        switch byte {
        case UInt8(ascii: "&"), UInt8(ascii: "#"): return true
        case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"):
            return !inURL
        default: return false
        }
    }

    /// Bytes that end a URL's authority.
    private static func endsAuthority(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"),
             UInt8(ascii: "\r"), UInt8(ascii: "\""), UInt8(ascii: "<"), UInt8(ascii: ">"):
            return true
        default: return false
        }
    }
}
