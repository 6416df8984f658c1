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

            // And the server saw the sign-in only
            #expect(f.served("/profile") == 1)
            #expect(f.served("/contacts") + f.served("/accounts") + f.served("/leads") == 0)
            #expect(f.controller.activity.queued == 0)

            // When the right password is given, work goes through again
            try await f.app.login(username: "admin", password: "secret")
            let page = try await f.app.loadPage(.contacts)
            #expect(page.items.count == 20)
            #expect(f.log.names == [.senbeiDidFailLogin, .senbeiDidLogin, .senbeiDidRetrieveContacts])
        }
    }

    @Test func aRefusalLaterInTheSessionSignsOutAndSaysSo() async throws {
        try await withSenbei { f in
            try await f.app.login()
            // Given the password changed on the server (here: the client's credentials)
            f.credentials.set(username: "admin", password: "changed")

            // When a list is refreshed, the 401 is a failed login, not a generic error
            let error = await #expect(throws: DepotError.self) { try await f.app.loadPage(.contacts, refresh: true) }
            #expect(error?.code == .unauthorized)
            #expect(f.log.names == [.senbeiDidLogin, .senbeiDidFailLogin])
            #expect(f.app.profile == nil)
            #expect(f.controller.pausedCategories.contains(.senbei), "data work waits for the next sign-in")
            #expect(error.map { SenbeiPresentation.message(for: $0) } == "Login failed: bad username or password.")
        }
    }

    @Test func aLateRefusalOfOldCredentialsDoesNotSignOutANewSession() async throws {
        let serverClock = ManualClock()
        try await withSenbei(serverClock: serverClock) { f in
            try await f.app.login()
            try await f.control(route: "/contacts", latencyMs: 1000)

            // Given a request sent with credentials that no longer work, held by the server
            f.credentials.set(username: "admin", password: "old")
            let stale = Task { try await f.app.loadPage(.contacts, refresh: true) }
            await serverClock.sleepers(atLeast: 1)

            // When the user signs in again with the right password, before the refusal arrives
            try await f.app.login(username: "admin", password: "secret")
            let drainer = ServerClockDrainer.start(serverClock)
            let page = try await stale.value
            await ServerClockDrainer.stop(drainer, on: serverClock)

            // Then the new session stands: the request went once more, under it
            #expect(page.items.count == 20)
            #expect(f.app.profile != nil)
            #expect(!f.log.names.contains(.senbeiDidFailLogin), "\(f.log.names)")
            #expect(f.served("/contacts") == 2)
            #expect(f.served("/profile") == 2)
        }
    }

    @Test func newCredentialsDoNotJoinASignInWithTheOldOnes() async throws {
        let serverClock = ManualClock()
        try await withSenbei(serverClock: serverClock, password: "wrong") { f in
            try await f.control(route: "/profile", latencyMs: 1000)
            // Given a sign-in with the wrong password, held by the server
            let first = Task { try await f.app.login() }
            await serverClock.sleepers(atLeast: 1)

            // When the right password is given while it runs
            let drainer = ServerClockDrainer.start(serverClock)
            let profile = try await f.app.login(username: "admin", password: "secret")
            await ServerClockDrainer.stop(drainer, on: serverClock)

            // Then the new sign-in is its own, and succeeds; the old refusal is no news
            #expect(f.app.profile == profile)
            #expect(f.served("/profile") == 2)
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
            try await f.control(route: "/profile", latencyMs: 1000)
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
            try await f.control(route: "/profile", latencyMs: 0)
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
