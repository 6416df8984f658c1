import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Security)
import Security
#endif

extension URLSessionTransport {
    /// A server's certificate, handed to a transport's server-trust hook so that
    /// the app can evaluate it itself: to pin a certificate or a public key, or
    /// to trust a private certificate authority.
    ///
    /// On Apple platforms `trust` is the `SecTrust` URLSession got for the
    /// connection. On other platforms URLSession does not ask its delegate about
    /// server trust, so the hook is never called there and the type holds only
    /// the host and port (see
    /// ``URLSessionTransport/init(maximumConnectionsPerHost:serverTrust:)``).
    public struct ServerTrustChallenge {
        /// The host the connection goes to, as in the request's URL.
        public let host: String
        /// The port the connection goes to.
        public let port: Int
        #if canImport(Security)
        /// The certificate chain and the policy to evaluate it by: check it with
        /// `SecTrustEvaluateWithError`, read it with `SecTrustCopyCertificateChain`.
        public let trust: SecTrust
        #endif
    }

    /// What a server-trust hook decides about a server's certificate.
    ///
    /// A struct, not an enum, so that a decision can be added without breaking
    /// a `switch`.
    public struct ServerTrustDecision: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case useSystemEvaluation, accept, reject
        }

        let base: Base

        /// Let the system evaluate the certificate, as without a hook: the
        /// system's roots, the host name, expiry and revocation rules.
        public static let useSystemEvaluation = ServerTrustDecision(base: .useSystemEvaluation)
        /// Trust the certificate: the hook has evaluated it, and the system's
        /// evaluation is skipped. A hook that accepts must do the checks the
        /// system would have done (`SecTrustEvaluateWithError` after setting
        /// its own anchors, for example), or any certificate gets through.
        public static let accept = ServerTrustDecision(base: .accept)
        /// Refuse the certificate: the connection is closed and the request fails
        /// with ``DepotError/Code/transport``, whose detail says the hook
        /// refused the certificate.
        public static let reject = ServerTrustDecision(base: .reject)

        public var description: String { base.rawValue }
    }

    /// How URLSession's authentication challenge is answered. The hook sees
    /// server-trust challenges only; every other challenge gets the default
    /// handling, as it would without a delegate method.
    static func answer(
        _ space: URLProtectionSpace,
        hook: (@Sendable (ServerTrustChallenge) -> ServerTrustDecision)?
    ) -> (URLSession.AuthChallengeDisposition, URLCredential?) {
        #if canImport(Security)
        guard let hook, space.authenticationMethod == NSURLAuthenticationMethodServerTrust,
              let trust = space.serverTrust
        else { return (.performDefaultHandling, nil) }
        switch hook(ServerTrustChallenge(host: space.host, port: space.port, trust: trust)).base {
        case .useSystemEvaluation: return (.performDefaultHandling, nil)
        case .accept: return (.useCredential, URLCredential(trust: trust))
        case .reject: return (.cancelAuthenticationChallenge, nil)
        }
        #else
        // swift-corelibs-foundation has no server-trust challenges (libcurl
        // verifies certificates itself): whatever comes here is another kind.
        return (.performDefaultHandling, nil)
        #endif
    }

    /// The detail of a failure because the server's certificate is not trusted.
    static let untrustedDetail = "TLS: the server's certificate is not trusted"
    /// The detail of a failure because the certificate does not name the host.
    static let hostnameMismatchDetail = "TLS: the server's certificate is not valid for this host name"
    /// The detail of any other failed handshake.
    static let handshakeDetail = "TLS: the handshake failed"
    /// The detail of a failure because the server-trust hook refused the certificate.
    static let refusedDetail = "TLS: the server-trust hook refused the server's certificate"

    /// Maps URLSession's TLS failures onto ``DepotError/Code/transport`` with a
    /// detail that says what was wrong; `nil` for an error that is not about TLS.
    ///
    /// Apple platforms have a code for each failure. Linux's URLSession reports
    /// libcurl's TLS failures as `.unknown`, with curl's message as the
    /// description ("SSL certificate problem: ...", "SSL: no alternative
    /// certificate subject name matches target ...").
    static func tlsFailure(_ error: URLError) -> DepotError? {
        switch error.code {
        case .serverCertificateUntrusted, .serverCertificateHasUnknownRoot, .serverCertificateHasBadDate,
             .serverCertificateNotYetValid:
            return DepotError(.transport, detail: untrustedDetail, underlying: error)
        case .secureConnectionFailed:
            return DepotError(.transport, detail: handshakeDetail, underlying: error)
        case .unknown:
            guard let message = error.userInfo[NSLocalizedDescriptionKey] as? String else { return nil }
            if message.hasPrefix("SSL certificate problem") {
                return DepotError(.transport, detail: untrustedDetail, underlying: error)
            }
            if message.hasPrefix("SSL:"), message.contains("subject name") {
                return DepotError(.transport, detail: hostnameMismatchDetail, underlying: error)
            }
            return nil
        default:
            return nil
        }
    }
}
