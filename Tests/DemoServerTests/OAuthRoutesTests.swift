import AsyncHTTPClient
@testable import DemoServer
import DepotTesting
import Foundation
import NIOCore
import NIOHTTP1
import Testing

/// `POST /oauth/token` (RFC 6749's password and refresh-token grants) and the
/// CRM routes' bearer tokens, with the server's clock in the test's hand.
@Suite(.timeLimit(.minutes(1))) struct OAuthRoutesTests {
    let routes = AppRoutesTests()

    func token(_ server: DemoServer, _ form: String) async throws -> (status: Int, body: [String: Any], headers: [String: String]) {
        var request = HTTPClientRequest(url: server.baseURL.absoluteString + "/oauth/token")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(ByteBuffer(string: form))
        let response = try await NerdfeedRoutesTests.client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 1 << 20)
        var headers: [String: String] = [:]
        for (name, value) in response.headers { headers[name.lowercased()] = value }
        return (Int(response.status.code), try routes.object(String(buffer: body)), headers)
    }

    @Test func aPasswordGrantGivesABearerTokenThatExpiresOnTheServersClock() async throws {
        let clock = ManualClock()
        try await DemoServer.withRunning(.init(clock: clock, tokenLifetime: .seconds(2))) { server in
            let granted = try await token(server, "grant_type=password&username=admin&password=secret&client_id=x")
            #expect(granted.status == 200)
            #expect(granted.body["token_type"] as? String == "Bearer")
            #expect(granted.body["expires_in"] as? Double == 2)
            #expect(granted.headers["cache-control"] == "no-store")
            let access = try #require(granted.body["access_token"] as? String)
            #expect(granted.body["refresh_token"] is String)

            #expect(try await routes.send(server, .GET, "/profile", headers: ["Authorization": "Bearer \(access)"]).status == 200)
            clock.advance(by: .seconds(2))
            let expired = try await routes.send(server, .GET, "/profile", headers: ["Authorization": "Bearer \(access)"])
            #expect(expired.status == 401)
            #expect(expired.headers["www-authenticate"]?.contains(#"error="invalid_token""#) == true)
            // Basic still works beside it.
            #expect(try await routes.send(server, .GET, "/profile").status == 200)
            #expect(server.currentStats.tokenGrants == ["password": 1])
        }
    }

    @Test func refreshTokensRotateAndAReusedOneIsRefused() async throws {
        try await DemoServer.withRunning { server in
            let first = try await token(server, "grant_type=password&username=admin&password=secret")
            let refresh = try #require(first.body["refresh_token"] as? String)
            let renewed = try await token(server, "grant_type=refresh_token&refresh_token=\(refresh)")
            #expect(renewed.status == 200)
            let newRefresh = try #require(renewed.body["refresh_token"] as? String)
            #expect(newRefresh != refresh)
            #expect(try await routes.send(server, .GET, "/profile", headers: ["Authorization": "Bearer \(renewed.body["access_token"] as? String ?? "")"]).status == 200)

            let reused = try await token(server, "grant_type=refresh_token&refresh_token=\(refresh)")
            #expect(reused.status == 400)
            #expect(reused.body["error"] as? String == "invalid_grant")
            #expect(try await token(server, "grant_type=refresh_token&refresh_token=\(newRefresh)").status == 200)
            #expect(server.currentStats.tokenGrants == ["password": 1, "refresh_token": 3])
        }
    }

    @Test(arguments: [
        ("grant_type=password&username=admin&password=nope", "invalid_grant"),
        ("grant_type=refresh_token&refresh_token=made-up", "invalid_grant"),
        ("grant_type=client_credentials", "unsupported_grant_type"),
        ("", "unsupported_grant_type"),
        ("%%%=&&==", "unsupported_grant_type"),
    ])
    func badGrantsAreRefusedWithAnOAuthError(_ form: String, _ error: String) async throws {
        try await DemoServer.withRunning { server in
            let refused = try await token(server, form)
            #expect(refused.status == 400)
            #expect(refused.body["error"] as? String == error)
            #expect(try await routes.send(server, .GET, "/profile", headers: ["Authorization": "Bearer made-up"]).status == 401)
        }
    }
}
