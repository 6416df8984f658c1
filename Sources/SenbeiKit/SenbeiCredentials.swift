import Foundation
import Synchronization

/// The user name and password Senbei signs in with, changeable while the
/// controller runs (the CLI asks again after a refused sign-in).
///
/// They are sent once per sign-in, to the server's token endpoint
/// (`grant_type=password`); every other request carries the bearer token the
/// controller's ``Depot/TokenAuthenticator`` holds. They live in memory only,
/// and so does the token.
///
/// For example:
///
/// ```swift
/// let credentials = SenbeiCredentials(username: "admin", password: "secret")
/// let app = try SenbeiApp(controller: controller, credentials: credentials)
/// credentials.set(username: "ann", password: "new secret")   // the next sign-in sends these
/// ```
public final class SenbeiCredentials: Sendable, CustomStringConvertible {
    private let current: Mutex<(username: String, password: String, generation: Int)>

    /// Makes credentials.
    public init(username: String, password: String) {
        current = Mutex((username, password, 0))
    }

    /// The user name now.
    public var username: String { current.withLock { $0.username } }

    /// The user name and the password, read together.
    var snapshot: (username: String, password: String) { current.withLock { ($0.username, $0.password) } }

    /// How many times the credentials were replaced: tells a sign-in with the
    /// current ones from one with older ones.
    var generation: Int { current.withLock { $0.generation } }

    /// Replaces the user name and password; the next sign-in sends them.
    public func set(username: String, password: String) {
        current.withLock { $0 = (username, password, $0.generation + 1) }
    }

    /// The user name only: the password never appears in descriptions.
    public var description: String { "SenbeiCredentials(\(username))" }
}
