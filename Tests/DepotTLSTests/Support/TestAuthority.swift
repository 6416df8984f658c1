import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A certificate authority made for one test, and a server certificate it signed.
///
/// Nothing is read from disk: each test makes its own keys, so a test can never
/// pass because a machine happens to trust something.
struct TestAuthority {
    /// The authority's self-signed certificate: the root a client must trust.
    let root: NIOSSLCertificate
    /// The root in DER, for `SecCertificateCreateWithData` on Apple platforms.
    let rootDER: [UInt8]
    /// The server's certificate, then the root.
    let serverChain: [NIOSSLCertificate]
    /// The server certificate's private key.
    let serverKey: NIOSSLPrivateKey

    /// The names a server certificate can be made for.
    enum ServerName {
        /// 127.0.0.1, where the tests' listener runs.
        case loopback
        /// A host name that is not the listener's.
        case otherHost

        var generalName: GeneralName {
            switch self {
            case .loopback: return .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))
            case .otherHost: return .dnsName("depot.invalid")
            }
        }
    }

    /// Makes a root valid for an hour either side of now, and a server
    /// certificate for `name` signed by it.
    init(serverName name: ServerName = .loopback) throws {
        let now = Date()
        let rootKey = P256.Signing.PrivateKey()
        let rootName = try DistinguishedName { CommonName("Depot Test Authority") }
        let root = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(rootKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 3600,
            issuer: rootName,
            subject: rootName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey)
        )
        let serverKey = P256.Signing.PrivateKey()
        let server = try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(serverKey.publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 3600,
            issuer: rootName,
            subject: try DistinguishedName { CommonName("Depot Test Server") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([name.generalName])
            },
            issuerPrivateKey: .init(rootKey)
        )
        let rootDER = try Self.der(root)
        self.rootDER = rootDER
        self.root = try NIOSSLCertificate(bytes: rootDER, format: .der)
        self.serverChain = [try NIOSSLCertificate(bytes: try Self.der(server), format: .der), self.root]
        self.serverKey = try NIOSSLPrivateKey(bytes: Array(serverKey.pemRepresentation.utf8), format: .pem)
    }

    /// A client configuration that trusts this authority only.
    var trustingClient: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates([root])
        return tls
    }

    /// The listener's configuration: this authority's server certificate.
    var server: TLSConfiguration {
        TLSConfiguration.makeServerConfiguration(
            certificateChain: serverChain.map { .certificate($0) },
            privateKey: .privateKey(serverKey)
        )
    }

    private static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}
