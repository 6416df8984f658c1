import Foundation

/// Changes every request in one place before it is sent: default headers,
/// credentials, signing. Adapters run in order, once per attempt, after the
/// base URL is resolved.
///
/// ```swift
/// struct UserAgent: RequestAdapter {
///     func adapt(_ request: inout TransportRequest) async throws {
///         request.headers["User-Agent"] = "Nerdfeed/1.0"
///     }
/// }
/// ```
///
/// Throwing fails the operation with ``DepotError/Code/invalidRequest``
/// (or the `DepotError` you throw).
public protocol RequestAdapter: Sendable {
    /// Adapts `request` in place.
    func adapt(_ request: inout TransportRequest) async throws
}

/// Adds headers that the request does not set itself.
///
/// ```swift
/// DefaultHeaders(["Accept": "application/json"])
/// ```
public struct DefaultHeaders: RequestAdapter {
    let headers: HeaderFields

    /// Adds `headers` to every request that lacks them.
    public init(_ headers: HeaderFields) {
        self.headers = headers
    }

    public func adapt(_ request: inout TransportRequest) async throws {
        for field in headers where !request.headers.contains(field.name) {
            request.headers.add(name: field.name, value: field.value)
        }
    }
}

/// The scheme, host and port of a URL: the unit credentials belong to.
public struct Origin: Hashable, Sendable, CustomStringConvertible {
    /// Lower-cased scheme.
    public let scheme: String
    /// Lower-cased host.
    public let host: String
    /// The port, with the scheme's default filled in.
    public let port: Int

    /// The origin of `url`, or `nil` when it has no scheme or host.
    public init?(_ url: URL) {
        guard let scheme = url.scheme?.lowercased() else { return nil }
        self.scheme = scheme
        self.host = url.host?.lowercased() ?? ""
        if let port = url.port {
            self.port = port
        } else {
            switch scheme {
            case "https", "wss": self.port = 443
            case "http", "ws": self.port = 80
            default: self.port = 0
            }
        }
    }

    public var description: String { "\(scheme)://\(host):\(port)" }
}

/// Attaches an `Authorization` header, but only to requests for its own origin.
///
/// ```swift
/// let server = URL(string: "https://crm.example.com")!
/// let config = NetworkController.Configuration(
///     baseURL: server,
///     adapters: [Credentials.basic(username: "ann", password: "secret", for: server)]
/// )
/// ```
///
/// Requests to any other origin, including redirect targets, never see it.
public struct Credentials: RequestAdapter {
    let origin: Origin?
    let authorization: @Sendable () async throws -> String?

    /// Attaches whatever `authorization` returns (skipped when it returns `nil`)
    /// to requests for `url`'s origin.
    public init(for url: URL, authorization: @escaping @Sendable () async throws -> String?) {
        self.origin = Origin(url)
        self.authorization = authorization
    }

    /// HTTP Basic credentials.
    public static func basic(username: String, password: String, for url: URL) -> Credentials {
        let token = Data("\(username):\(password)".utf8).base64EncodedString()
        return Credentials(for: url) { "Basic \(token)" }
    }

    /// A bearer token.
    public static func bearer(_ token: String, for url: URL) -> Credentials {
        Credentials(for: url) { "Bearer \(token)" }
    }

    public func adapt(_ request: inout TransportRequest) async throws {
        guard let origin, Origin(request.url) == origin, !request.headers.contains("Authorization") else { return }
        if let value = try await authorization() {
            request.headers["Authorization"] = value
        }
    }
}
