import AsyncHTTPClient
import Depot
import NIOSSL

extension AsyncHTTPClientTransport {
    /// The detail of a failure because the server's certificate chain is not trusted.
    static let untrustedDetail = "TLS: the server's certificate is not trusted"
    /// The detail of a failure because the certificate does not name the host.
    static let hostnameMismatchDetail = "TLS: the server's certificate is not valid for this host name"
    /// The detail of any other failed handshake.
    static let handshakeDetail = "TLS: the handshake failed"

    /// Maps a failed TLS handshake onto ``Depot/DepotError/Code/transport``, with a
    /// detail that says what was wrong; `nil` for an error that is not about TLS.
    ///
    /// SwiftNIO SSL (Linux, and wherever the client runs on `NIOPosix`) reports a
    /// chain it cannot verify as `handshakeFailed` with BoringSSL's
    /// `CERTIFICATE_VERIFY_FAILED`, and a certificate for another host as
    /// `NIOSSLExtraError.failedToValidateHostname`. On Apple platforms the
    /// client runs on Network.framework, which reports an `OSStatus`.
    static func tlsFailure(_ error: any Error) -> DepotError? {
        if let error = error as? NIOSSLError {
            switch error {
            case .handshakeFailed(let reason):
                let untrusted = "\(reason)".contains("CERTIFICATE_VERIFY_FAILED")
                return DepotError(.transport, detail: untrusted ? untrustedDetail : handshakeDetail, underlying: error)
            case .noCertificateToValidate, .unableToValidateCertificate:
                return DepotError(.transport, detail: untrustedDetail, underlying: error)
            default:
                return nil
            }
        }
        if let error = error as? NIOSSLExtraError {
            switch error {
            case .failedToValidateHostname, .serverHostnameImpossibleToMatch:
                return DepotError(.transport, detail: hostnameMismatchDetail, underlying: error)
            default:
                return DepotError(.transport, detail: handshakeDetail, underlying: error)
            }
        }
        #if canImport(Network)
        if let error = error as? HTTPClient.NWTLSError {
            switch error.status {
            case -9843:  // errSSLHostNameMismatch
                return DepotError(.transport, detail: hostnameMismatchDetail, underlying: error)
            // errSSLXCertChainInvalid, errSSLBadCert, errSSLUnknownRootCert,
            // errSSLNoRootCert, errSSLCertExpired, errSSLCertNotYetValid
            case -9807, -9808, -9812, -9813, -9814, -9815:
                return DepotError(.transport, detail: untrustedDetail, underlying: error)
            default:
                return DepotError(.transport, detail: handshakeDetail, underlying: error)
            }
        }
        #endif
        return nil
    }
}
