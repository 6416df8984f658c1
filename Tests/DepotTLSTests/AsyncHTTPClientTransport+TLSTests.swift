import AsyncHTTPClient
import Depot
@testable import DepotAsyncHTTPClient
import Foundation
import NIOSSL
import Testing

/// TLS settings reach AsyncHTTPClient: trust roots decide, and a refused
/// certificate fails with a `DepotError` that says why.
@Suite struct AsyncHTTPClientTransportTLSTests {
    @Test func certificateFromATrustedRootPasses() async throws {
        // Given a listener whose certificate the test's own authority signed
        let authority = try TestAuthority()
        try await TLSListener.withRunning(authority.server) { baseURL in
            // When the transport trusts that authority
            let transport = AsyncHTTPClientTransport(tlsConfiguration: authority.trustingClient)
            // Then the request goes through
            let text = try await fetchGreeting(from: baseURL, through: transport)
            #expect(text == TLSListener.greeting)
        }
    }

    @Test func untrustedCertificateFailsClearly() async throws {
        let authority = try TestAuthority()
        try await TLSListener.withRunning(authority.server) { baseURL in
            // The default configuration trusts the system's roots only.
            let transport = AsyncHTTPClientTransport()
            let error = try #require(await depotError { _ = try await fetchGreeting(from: baseURL, through: transport) })
            #expect(error.code == .transport)
            #expect(error.detail == "TLS: the server's certificate is not trusted")
            #expect(error.description.contains("TLS: the server's certificate is not trusted"))
            #if !canImport(Network)
            #expect(error.underlying is NIOSSLError)
            #endif
        }
    }

    @Test func certificateForAnotherHostFailsClearly() async throws {
        // A certificate from a trusted root, but for depot.invalid, not 127.0.0.1
        let authority = try TestAuthority(serverName: .otherHost)
        try await TLSListener.withRunning(authority.server) { baseURL in
            let transport = AsyncHTTPClientTransport(tlsConfiguration: authority.trustingClient)
            let error = try #require(await depotError { _ = try await fetchGreeting(from: baseURL, through: transport) })
            #expect(error.code == .transport)
            #if canImport(Network)
            // Network.framework may report a name mismatch as a bad certificate.
            #expect(error.detail?.hasPrefix("TLS: the server's certificate is not") == true)
            #else
            #expect(error.detail == "TLS: the server's certificate is not valid for this host name")
            #endif
        }
    }

    @Test func hostNameCheckCanBeTurnedOffAlone() async throws {
        // The chain is still verified against the root; only the name is not.
        let authority = try TestAuthority(serverName: .otherHost)
        try await TLSListener.withRunning(authority.server) { baseURL in
            var tls = authority.trustingClient
            tls.certificateVerification = .noHostnameVerification
            let text = try await fetchGreeting(from: baseURL, through: AsyncHTTPClientTransport(tlsConfiguration: tls))
            #expect(text == TLSListener.greeting)
        }
    }

    @Test func verificationCanBeTurnedOffForOneTransport() async throws {
        // An app's choice, for a development server: no verification at all.
        let authority = try TestAuthority(serverName: .otherHost)
        try await TLSListener.withRunning(authority.server) { baseURL in
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .none
            let text = try await fetchGreeting(from: baseURL, through: AsyncHTTPClientTransport(tlsConfiguration: tls))
            #expect(text == TLSListener.greeting)
        }
    }

    @Test func configurationsOwnTLSStillApplies() async throws {
        let authority = try TestAuthority()
        try await TLSListener.withRunning(authority.server) { baseURL in
            // init(configuration:) as before: its TLS configuration is kept
            var configuration = AsyncHTTPClientTransport.defaultConfiguration
            configuration.tlsConfiguration = authority.trustingClient
            let text = try await fetchGreeting(from: baseURL, through: AsyncHTTPClientTransport(configuration: configuration))
            #expect(text == TLSListener.greeting)

            // ... and an explicit tlsConfiguration replaces it.
            let replaced = AsyncHTTPClientTransport(configuration: configuration, tlsConfiguration: .makeClientConfiguration())
            let error = try #require(await depotError { _ = try await fetchGreeting(from: baseURL, through: replaced) })
            #expect(error.detail == "TLS: the server's certificate is not trusted")
        }
    }

    @Test func clientOwnedByTheAppUsesItsTLS() async throws {
        let authority = try TestAuthority()
        try await TLSListener.withRunning(authority.server) { baseURL in
            let client = HTTPClient(
                eventLoopGroup: HTTPClient.defaultEventLoopGroup,
                configuration: .init(tlsConfiguration: authority.trustingClient, redirectConfiguration: .disallow)
            )
            let text: String
            do {
                text = try await fetchGreeting(from: baseURL, through: AsyncHTTPClientTransport(client: client))
            } catch {
                try await client.shutdown()
                throw error
            }
            try await client.shutdown()
            #expect(text == TLSListener.greeting)
        }
    }

    @Test func tlsErrorsMapToTransportWithADetail() {
        let hostname = AsyncHTTPClientTransport.map(NIOSSLExtraError.failedToValidateHostname)
        #expect(hostname.code == .transport)
        #expect(hostname.detail == AsyncHTTPClientTransport.hostnameMismatchDetail)

        let handshake = AsyncHTTPClientTransport.map(NIOSSLError.handshakeFailed(.sslError([])))
        #expect(handshake.code == .transport)
        #expect(handshake.detail == AsyncHTTPClientTransport.handshakeDetail)

        // Not a TLS error: mapped as before.
        #expect(AsyncHTTPClientTransport.map(NIOSSLError.uncleanShutdown).detail == nil)
    }
}
