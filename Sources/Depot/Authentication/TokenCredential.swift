import Foundation

/// An access token, the refresh token that renews it, and when it expires.
///
/// Its `description`, `debugDescription` and reflection never show the tokens,
/// so a credential printed, logged or dumped by mistake leaks nothing.
///
/// For example:
///
/// ```swift
/// let credential = TokenCredential(accessToken: "eyJ…", refreshToken: "r1", expiresAt: Date().addingTimeInterval(3600))
/// print(credential)   // TokenCredential(access token: 6 characters, refresh token: yes, expires 2026-11-25 11:00:00 +0000)
/// ```
public struct TokenCredential: Sendable, Hashable, Codable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The token sent as `Authorization: Bearer …`.
    public var accessToken: String
    /// The token that buys a new access token; `nil` when the server gave none
    /// (then an expired credential signs out instead of refreshing).
    public var refreshToken: String?
    /// When the access token stops working; `nil` when unknown (it is then
    /// refreshed only after a 401).
    public var expiresAt: Date?
    /// When the server issued it, if known: with ``expiresAt``, how long the
    /// token lives, so that a short-lived one is refreshed at half its life
    /// rather than before every request (``TokenAuthenticator/refreshWindow``).
    public var issuedAt: Date?

    /// Makes a credential.
    public init(accessToken: String, refreshToken: String? = nil, expiresAt: Date? = nil, issuedAt: Date? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
    }

    /// Whether the access token expires within `window` of `now` (or has expired).
    public func expires(within window: Duration, of now: Date) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt.timeIntervalSince(now) <= Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
    }

    public var description: String {
        var text = "TokenCredential(access token: \(accessToken.count) characters, refresh token: \(refreshToken == nil ? "no" : "yes")"
        if let expiresAt { text += ", expires \(expiresAt)" }
        return text + ")"
    }

    public var debugDescription: String { description }

    /// Shows the same redacted fields as ``description`` to `dump` and debuggers.
    public var customMirror: Mirror {
        Mirror(self, children: ["accessToken": "<redacted>", "refreshToken": refreshToken == nil ? "nil" : "<redacted>", "expiresAt": expiresAt as Any])
    }
}

/// Where a ``TokenAuthenticator`` keeps its credential between launches.
///
/// Depot never writes credentials into the cache database or the logs; it
/// hands them to this storage. On Apple platforms, implement it over the
/// Keychain; tests use ``InMemoryCredentialStorage``.
///
/// For example, a storage that keeps the credential in a file the app protects:
///
/// ```swift
/// struct FileCredentialStorage: CredentialStorage {
///     let url: URL
///     func load() async throws -> TokenCredential? {
///         guard let data = try? Data(contentsOf: url) else { return nil }
///         return try JSONDecoder().decode(TokenCredential.self, from: data)
///     }
///     func save(_ credential: TokenCredential) async throws {
///         try JSONEncoder().encode(credential).write(to: url, options: [.atomic, .completeFileProtection])
///     }
///     func delete() async throws { try? FileManager.default.removeItem(at: url) }
/// }
/// ```
///
/// Contract: calls may come from any task, one at a time per authenticator
/// for `save` and `delete`. A failing `save` keeps the new credential in
/// memory for this launch; a failing `load` counts as no credential.
public protocol CredentialStorage: Sendable {
    /// The stored credential, if any.
    func load() async throws -> TokenCredential?
    /// Replaces the stored credential.
    func save(_ credential: TokenCredential) async throws
    /// Removes the stored credential (after a sign-out).
    func delete() async throws
}

/// Keeps the credential in memory only: for tests, and for apps that sign in
/// at every launch.
///
/// For example:
///
/// ```swift
/// let storage = InMemoryCredentialStorage(TokenCredential(accessToken: "a1", refreshToken: "r1"))
/// ```
public final class InMemoryCredentialStorage: CredentialStorage {
    private let stored: Locked<TokenCredential?>

    /// Makes a storage holding `credential`.
    public init(_ credential: TokenCredential? = nil) {
        stored = Locked(credential)
    }

    /// What the storage holds now.
    public var credential: TokenCredential? { stored.value }

    public func load() async throws -> TokenCredential? { stored.value }
    public func save(_ credential: TokenCredential) async throws { stored.value = credential }
    public func delete() async throws { stored.value = nil }
}
