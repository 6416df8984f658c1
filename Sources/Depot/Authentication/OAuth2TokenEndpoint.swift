import Foundation

/// An OAuth 2 token endpoint (RFC 6749 §4.3 and §6): sign in with a password,
/// renew with a refresh token, both as form-encoded `POST`s that answer JSON
/// with `access_token`, `refresh_token` and `expires_in`.
///
/// For example:
///
/// ```swift
/// let tokens = OAuth2TokenEndpoint(url: URL(string: "https://crm.example.com/oauth/token")!, clientID: "senbei")
/// let credential = try await controller.perform(tokens.passwordGrant(username: "ann", password: "secret"))
/// await authenticator.signIn(credential)
/// ```
public struct OAuth2TokenEndpoint: Sendable, Hashable {
    /// The endpoint's URL.
    public var url: URL
    /// The `client_id` sent with every grant, if the server wants one.
    public var clientID: String?

    /// Makes an endpoint.
    public init(url: URL, clientID: String? = nil) {
        self.url = url
        self.clientID = clientID
    }

    /// The operation that signs in with `grant_type=password`.
    public func passwordGrant(username: String, password: String) -> OAuth2PasswordGrant {
        OAuth2PasswordGrant(endpoint: self, username: username, password: password)
    }

    /// A form-encoded `POST` of `fields` (plus `client_id`) to the endpoint.
    func request(_ fields: [String: String]) -> TransportRequest {
        var fields = fields
        if let clientID { fields["client_id"] = clientID }
        var request = TransportRequest(url: url, method: .post)
        request.headers["Content-Type"] = "application/x-www-form-urlencoded"
        request.headers["Accept"] = "application/json"
        request.body = Data(FormEncoding.encode(fields.sorted { $0.key < $1.key }).utf8)
        return request
    }

    /// The credential in a token response. A refresh that brings no new
    /// refresh token keeps `previous`'s (RFC 6749 §6).
    ///
    /// - Throws: The status's error (400 and 401 mean refused) or `.decoding`.
    func credential(from response: NetworkResponse, now: Date, keeping previous: TokenCredential? = nil) throws(DepotError) -> TokenCredential {
        guard response.status == 200 else {
            throw DepotError.forStatus(response.status, body: response.body, operation: "token endpoint")
        }
        struct Answer: Decodable {
            var access_token: String
            var refresh_token: String?
            var expires_in: Double?
            var token_type: String?
        }
        let answer: Answer
        do {
            answer = try JSONDecoder().decode(Answer.self, from: response.body)
        } catch {
            throw DepotError(.decoding, operation: "token endpoint", status: response.status, bodyExcerpt: nil, detail: "not a token response", underlying: error)
        }
        guard !answer.access_token.isEmpty, answer.token_type.map({ $0.lowercased() == "bearer" }) ?? true else {
            throw DepotError(.decoding, operation: "token endpoint", status: response.status, detail: "no bearer access token in the token response")
        }
        let expiresAt = answer.expires_in.flatMap { $0.isFinite && $0 >= 0 ? now.addingTimeInterval($0) : nil }
        return TokenCredential(accessToken: answer.access_token, refreshToken: answer.refresh_token ?? previous?.refreshToken, expiresAt: expiresAt, issuedAt: now)
    }
}

/// Signs in at an ``OAuth2TokenEndpoint`` with `grant_type=password`; its
/// output is the credential to hand to ``TokenAuthenticator/signIn(_:)``.
///
/// It fails fast offline, is never retried (a password is sent once), and its
/// error's status says why: 400 or 401 for wrong credentials.
public struct OAuth2PasswordGrant: NetworkOperation, CustomStringConvertible {
    /// The endpoint.
    public let endpoint: OAuth2TokenEndpoint
    let username: String
    let password: String

    /// `POST` of the form to the endpoint.
    public var request: NetworkRequest {
        let sent = endpoint.request(["grant_type": "password", "username": username, "password": password])
        let body = sent.body ?? Data()
        return NetworkRequest(method: .post, target: .url(endpoint.url), headers: ["Accept": "application/json"],
                              body: .data(body, contentType: "application/x-www-form-urlencoded"))
    }

    /// The user name; the password never appears in descriptions.
    public var description: String { "OAuth2PasswordGrant(\(username) at \(endpoint.url.absoluteString))" }

    public var offlineBehavior: OfflineBehavior { .failFast }
    public var retryPolicy: RetryPolicy? { .never }
    public var priority: Priority { .high }

    /// Accepts every status: ``process(_:context:)`` turns a refusal into its error.
    public func validate(_ response: NetworkResponse) throws {}

    /// The credential the endpoint answered with.
    public func process(_ response: NetworkResponse, context: OperationContext) async throws -> TokenCredential {
        try endpoint.credential(from: response, now: context.now)
    }
}
