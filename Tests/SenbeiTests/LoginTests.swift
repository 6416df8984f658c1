import DemoServer
import Depot
import DepotStore
import DepotTesting
import Foundation
import SenbeiKit
import Testing

/// Sign-in: data work waits for it, a refusal cancels what waits.
@Suite(.timeLimit(.minutes(2)))
@MainActor
struct LoginTests {
    @Test func aRefusedLoginPostsLoginFailedAndCancelsTheQueue() async throws {
        try await withSenbei(password: "wrong") { f in
            // Given three fetches queued before anyone signed in (data work is held)
            let outcomes = Outcomes<CacheUpdate<Int>>()
            for kind in [EntityKind.contacts, .accounts, .leads] {
                f.controller.enqueue(FetchList(kind)) { result in outcomes.record(result) }
            }
            #expect(f.controller.activity.queued == 3)

            // When the server refuses the credentials
            let error = await #expect(throws: DepotError.self) { try await f.app.login() }
            #expect(error?.code == .unauthorized)

            // Then login-failed is posted with the error, and the queued work fails as cancelled
            await outcomes.wait(for: 3)
            #expect(outcomes.results.allSatisfy { $0.failure?.code == .cancelled }, "\(outcomes.results)")
            #expect(f.log.names == [.senbeiDidFailLogin])
            #expect(f.log.last(.senbeiDidFailLogin)?.error?.code == .unauthorized)
            #expect(f.app.profile == nil)

            // And the server saw the sign-in only: the password grant, refused before any profile
            #expect(f.tokenGrants("password") == 1)
            #expect(f.served("/profile") == 0)
            #expect(f.served("/contacts") + f.served("/accounts") + f.served("/leads") == 0)
            #expect(f.controller.activity.queued == 0)

            // When the right password is given, work goes through again
            try await f.app.login(username: "admin", password: "secret")
            let page = try await f.app.loadPage(.contacts)
            #expect(page.items.count == 20)
            #expect(f.log.names == [.senbeiDidFailLogin, .senbeiDidLogin, .senbeiDidRetrieveContacts])
        }
    }

    /// With tokens, a session ends when the server refuses to renew the token
    /// (with HTTP Basic it was any 401: the password had changed). The user
    /// hears it once; the next call signs in again with the same credentials.
    @Test func aSessionTheServerEndsSignsOutSaysSoAndSignsInAgain() async throws {
        let serverClock = ManualClock()
        try await withSenbei(serverClock: serverClock) { f in
            try await f.app.login()
            // Given the session ended on the server: its refresh token was used elsewhere, its token expired
            try await f.endSessionOnServer(serverClock)

            // When a list is refreshed, the 401 starts a refresh, which is refused: a sign-out, not a generic error
            let error = await #expect(throws: DepotError.self) { try await f.app.loadPage(.contacts, refresh: true) }
            #expect(error?.code == .unauthorized)
            #expect(f.tokenGrants("refresh_token") == 2, "the one made elsewhere, and the app's, refused")
            #expect(f.log.names == [.senbeiDidLogin, .senbeiDidFailLogin])
            #expect(f.app.profile == nil)
            #expect(f.app.authenticator.isSignedOut)
            #expect(f.controller.pausedCategories.contains(.senbei), "data work waits for the next sign-in")
            #expect(error.map { SenbeiPresentation.message(for: $0) } == "Signed out: the server ended the session; sign in again.")

            // And the next call signs in again with the same credentials, without asking
            let page = try await f.app.loadPage(.contacts, refresh: true)
            #expect(page.source == .network && page.items.count == 20)
            #expect(f.tokenGrants("password") == 2)
            #expect(f.log.names == [.senbeiDidLogin, .senbeiDidFailLogin, .senbeiDidLogin, .senbeiDidRetrieveContacts], "\(f.log.names)")
        }
    }

    /// A request sent with a token that expires before the server handles it,
    /// while the user signs in again, goes once more with the new token: the
    /// new session stands, and nothing is refreshed. (With HTTP Basic this was
    /// a refusal of replaced credentials, resent by SenbeiApp itself; the
    /// authenticator does it now.)
    @Test func aRequestRefusedForAnOldTokenGoesAgainUnderTheNewSession() async throws {
        let serverClock = ManualClock()
        try await withSenbei(serverClock: serverClock) { f in
            try await f.app.login()  // token 1: good until 3600 s of server time
            try await f.control(route: "/contacts", latencyMs: 1000)
            serverClock.advance(by: .seconds(3000))

            // Given a request sent with token 1, held by the server
            let stale = Task { try await f.app.loadPage(.contacts, refresh: true) }
            await serverClock.sleepers(atLeast: 1)

            // When the user signs in again (token 2), and token 1 expires before the server looks at it
            try await f.app.login(username: "admin", password: "secret")
            serverClock.advance(by: .seconds(601))
            let drainer = ServerClockDrainer.start(serverClock)
            let page = try await stale.value
            await ServerClockDrainer.stop(drainer, on: serverClock)

            // Then the new session stands: the request went once more, with token 2
            #expect(page.items.count == 20)
            #expect(f.app.profile != nil)
            #expect(!f.log.names.contains(.senbeiDidFailLogin), "\(f.log.names)")
            #expect(f.served("/contacts") == 2)
            #expect(f.served("/profile") == 2)
            #expect(f.tokenGrants("password") == 2 && f.tokenGrants("refresh_token") == 0)
        }
    }

    @Test func newCredentialsDoNotJoinASignInWithTheOldOnes() async throws {
        let serverClock = ManualClock()
        try await withSenbei(serverClock: serverClock, password: "wrong") { f in
            try await f.control(route: "/oauth/token", latencyMs: 1000)
            // Given a sign-in with the wrong password, held by the server
            let first = Task { try await f.app.login() }
            await serverClock.sleepers(atLeast: 1)

            // When the right password is given while it runs
            let drainer = ServerClockDrainer.start(serverClock)
            let profile = try await f.app.login(username: "admin", password: "secret")
            await ServerClockDrainer.stop(drainer, on: serverClock)

            // Then the new sign-in is its own, and succeeds; the old refusal is no news
            #expect(f.app.profile == profile)
            #expect(f.tokenGrants("password") == 2)
            #expect(f.served("/profile") == 1)
            #expect(f.log.names == [.senbeiDidLogin], "\(f.log.names)")
            let refused = await #expect(throws: DepotError.self) { try await first.value }
            #expect(refused?.code == .unauthorized)
        }
    }

    @Test func aSignInThatFailsWithoutARefusalKeepsTheSessionAndLetsWorkGo() async throws {
        try await withSenbei { f in
            try await f.app.login()
            // Given the server unreachable while the user signs in again
            try await f.setOffline(true)
            let error = await #expect(throws: DepotError.self) { try await f.app.login(username: "admin", password: "secret") }
            #expect(error != nil && error?.code != .unauthorized, "\(String(describing: error))")
            try await f.setOffline(false)

            // Then the earlier session stands and data work is not held for good
            #expect(f.app.profile != nil)
            try #require(!f.controller.pausedCategories.contains(.senbei), "held data work would wait for good")
            let page = try await f.app.loadPage(.contacts, refresh: true)
            #expect(page.items.count == 20)
            #expect(f.log.names == [.senbeiDidLogin, .senbeiDidFailWithError, .senbeiDidRetrieveContacts], "\(f.log.names)")
        }
    }

    @Test func aSignInOutdatedByNewCredentialsWithoutANewSignInLetsWorkGo() async throws {
        let serverClock = ManualClock()
        try await withSenbei(serverClock: serverClock) { f in
            try await f.app.login()
            try await f.control(route: "/oauth/token", latencyMs: 1000)
            // Given a second sign-in with a wrong password, held by the server
            let second = Task { try await f.app.login(username: "admin", password: "wrong") }
            await serverClock.sleepers(atLeast: 1)

            // When the credentials are set right again without signing in, and the refusal comes
            f.credentials.set(username: "admin", password: "secret")
            let drainer = ServerClockDrainer.start(serverClock)
            let refused = await #expect(throws: DepotError.self) { try await second.value }
            await ServerClockDrainer.stop(drainer, on: serverClock)
            #expect(refused?.code == .unauthorized)

            // Then the refusal of outdated credentials is no news, and data work is not held for good
            #expect(f.app.profile != nil)
            try #require(!f.controller.pausedCategories.contains(.senbei), "held data work would wait for good")
            try await f.control(route: "/oauth/token", latencyMs: 0)
            let page = try await f.app.loadPage(.contacts, refresh: true)
            #expect(page.items.count == 20)
            #expect(f.log.names == [.senbeiDidLogin, .senbeiDidRetrieveContacts], "\(f.log.names)")
        }
    }

    @Test func concurrentCallsShareOneSignIn() async throws {
        try await withSenbei { f in
            async let contacts = f.app.loadPage(.contacts)
            async let accounts = f.app.loadPage(.accounts)
            _ = try await (contacts, accounts)
            #expect(f.served("/profile") == 1)
            #expect(f.log.names.filter { $0 == .senbeiDidLogin }.count == 1)
        }
    }
}
