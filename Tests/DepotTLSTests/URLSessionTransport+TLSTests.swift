@testable import Depot
import Foundation
import Synchronization
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Security)
import Security
#endif

/// URLSession's TLS: a clear error for an untrusted certificate everywhere, and
/// the server-trust hook where URLSession asks its delegate (Apple platforms).
@Suite struct URLSessionTransportTLSTests {
    @Test func untrustedCertificateFailsClearly() async throws {
        let authority = try TestAuthority()
        try await TLSListener.withRunning(authority.server) { baseURL in
            let error = try #require(await depotError { _ = try await fetchGreeting(from: baseURL, through: URLSessionTransport()) })
            #expect(error.code == .transport)
            #expect(error.detail == "TLS: the server's certificate is not trusted")
            #expect(error.underlying is URLError)
        }
    }

    @Test func hookSeesServerTrustChallengesOnly() {
        let calls = Calls()
        let hook: @Sendable (URLSessionTransport.ServerTrustChallenge) -> URLSessionTransport.ServerTrustDecision = { challenge in
            calls.record(challenge.host)
            return .reject
        }
        // An HTTP Basic challenge gets the default handling, and never reaches the hook.
        let basic = URLProtectionSpace(host: "127.0.0.1", port: 443, protocol: "https", realm: "api", authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
        let (disposition, credential) = URLSessionTransport.answer(basic, hook: hook)
        #expect(disposition == .performDefaultHandling)
        #expect(credential == nil)
        #expect(calls.hosts.isEmpty)
    }

    @Test func tlsErrorsMapToTransportWithADetail() {
        // Apple platforms: a code per failure.
        #expect(URLSessionTransport.map(URLError(.serverCertificateUntrusted)).detail == "TLS: the server's certificate is not trusted")
        #expect(URLSessionTransport.map(URLError(.serverCertificateHasBadDate)).detail == "TLS: the server's certificate is not trusted")
        #expect(URLSessionTransport.map(URLError(.secureConnectionFailed)).detail == "TLS: the handshake failed")
        // Linux: `.unknown`, with libcurl's message.
        let unknownIssuer = URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "SSL certificate problem: unable to get local issuer certificate"])
        #expect(URLSessionTransport.map(unknownIssuer).detail == "TLS: the server's certificate is not trusted")
        let otherHost = URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "SSL: no alternative certificate subject name matches target ipv4 address '127.0.0.1'"])
        #expect(URLSessionTransport.map(otherHost).detail == "TLS: the server's certificate is not valid for this host name")
        // Not TLS: as before.
        let other = URLSessionTransport.map(URLError(.unknown))
        #expect(other.code == .transport)
        #expect(other.detail == nil)
        #expect(URLSessionTransport.map(URLError(.timedOut)).code == .timedOut)
    }

    #if !canImport(Security)
    @Test func hookCannotWeakenTrustWhereThePlatformVerifiesItself() async throws {
        // Linux's URLSession never asks about server trust: even a hook that
        // accepts everything leaves an untrusted certificate refused.
        let authority = try TestAuthority()
        try await TLSListener.withRunning(authority.server) { baseURL in
            let transport = URLSessionTransport(serverTrust: { _ in .accept })
            let error = try #require(await depotError { _ = try await fetchGreeting(from: baseURL, through: transport) })
            #expect(error.detail == "TLS: the server's certificate is not trusted")
        }
    }
    #endif

    #if canImport(Security)
    @Test func hookThatTrustsTheTestRootPasses() async throws {
        let authority = try TestAuthority()
        let rootDER = authority.rootDER
        try await TLSListener.withRunning(authority.server) { baseURL in
            let transport = URLSessionTransport(serverTrust: { challenge in
                guard let root = SecCertificateCreateWithData(nil, Data(rootDER) as CFData) else { return .reject }
                SecTrustSetAnchorCertificates(challenge.trust, [root] as CFArray)
                SecTrustSetAnchorCertificatesOnly(challenge.trust, true)
                return SecTrustEvaluateWithError(challenge.trust, nil) ? .accept : .reject
            })
            let text = try await fetchGreeting(from: baseURL, through: transport)
            #expect(text == TLSListener.greeting)
        }
    }

    @Test func hookThatRefusesFailsClearly() async throws {
        let authority = try TestAuthority()
        try await TLSListener.withRunning(authority.server) { baseURL in
            let transport = URLSessionTransport(serverTrust: { _ in .reject })
            let error = try #require(await depotError { _ = try await fetchGreeting(from: baseURL, through: transport) })
            #expect(error.code == .transport)
            #expect(error.detail == "TLS: the server-trust hook refused the server's certificate")
        }
    }
    #endif
}

/// The hosts a hook was called for.
private final class Calls: Sendable {
    private let state = Mutex<[String]>([])
    func record(_ host: String) { state.withLock { $0.append(host) } }
    var hosts: [String] { state.withLock { $0 } }
}
