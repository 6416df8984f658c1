import Depot
import Foundation
import Synchronization

/// The user name and password Senbei signs in with, changeable while the
/// controller runs (the CLI asks again after a refused sign-in).
///
/// The controller gets them through ``adapter(for:)``: HTTP Basic on every
/// request to the server's origin, and to no other.
///
/// For example:
///
/// ```swift
/// let credentials = SenbeiCredentials(username: "admin", password: "secret")
/// let configuration = NetworkController.Configuration(baseURL: server, adapters: [credentials.adapter(for: server)])
/// ```
public final class SenbeiCredentials: Sendable {
    private let current: Mutex<(username: String, password: String, generation: Int)>

    /// Makes credentials.
    public init(username: String, password: String) {
        current = Mutex((username, password, 0))
    }

    /// The user name now.
    public var username: String { current.withLock { $0.username } }

    /// How many times the credentials were replaced: tells a sign-in with the
    /// current ones from one with older ones.
    var generation: Int { current.withLock { $0.generation } }

    /// Replaces the user name and password; the next request carries them.
    public func set(username: String, password: String) {
        current.withLock { $0 = (username, password, $0.generation + 1) }
    }

    /// An adapter that attaches `Authorization: Basic …` with the current
    /// credentials to requests for `server`'s origin only.
    public func adapter(for server: URL) -> Credentials {
        Credentials(for: server) { [self] in
            let (username, password) = current.withLock { ($0.username, $0.password) }
            return "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
        }
    }
}
