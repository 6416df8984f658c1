import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// Delivery: retries with the same key, order within a lane, rollbacks,
/// what a later run sends, the shutdown grace, 401s and old payloads.
extension OutboxTests {
    /// The first answer is lost after the server stored the post; the retry
    /// carries the same key, gets the replayed answer, and commits. The
    /// server holds the post once.
    @Test func aLostAnswerIsRetriedWithTheSameKeyAndDeliveredOnce() async throws {
        try await withOnlineOutbox { server, store, controller, outbox in
            try await Self.dropResponses(1, on: "/posts", controller: controller)
            let id = try await outbox.send(SendPost("local-1", "exactly once, please"))
            let outcome = await id.outcome()
            let response = try outcome.get()
            #expect(response.status == 201)
            // The answer is the server's replay of the first attempt's:
            // the retry carried the same key.
            #expect(response.headers["Idempotent-Replayed"] == "true")
            let posts = try await Self.serverPosts(server, controller: controller, texts: ["exactly once, please"])
            #expect(posts.count == 1)
            #expect(try await Self.rows(store) == [PostRow(localID: "local-1", serverID: posts.keys.first, text: "exactly once, please", isPending: false)])
            #expect(try await outbox.entries().isEmpty)
        }
    }

    /// A 422 rolls the optimistic row back and removes the entry; the lane
    /// goes on with the next one.
    @Test func aPermanentFailureRollsBackAndTheLaneGoesOn() async throws {
        try await withOnlineOutbox { server, store, controller, outbox in
            let rejected = try await outbox.send(SendPost("local-1", "   "))
            let accepted = try await outbox.send(SendPost("local-2", "after the rejected one"))
            let failure = await rejected.outcome()
            guard case .failure(let error) = failure else {
                Issue.record("the empty post was accepted")
                return
            }
            #expect(error.status == 422)
            #expect(try await accepted.outcome().get().status == 201)
            #expect(try await Self.rows(store).map(\.localID) == ["local-2"])
            #expect(try await outbox.entries().isEmpty)
        }
    }

    /// Mutations of one lane reach the server in the order they were sent.
    @Test func oneLaneIsDeliveredInOrder() async throws {
        try await withOnlineOutbox { server, store, controller, outbox in
            let texts = (1...8).map { "in order \($0)" }
            var tickets: [OutboxTicket] = []
            for (index, text) in texts.enumerated() { tickets.append(try await outbox.send(SendPost("local-\(index)", text))) }
            for ticket in tickets { _ = try await ticket.outcome().get() }
            let posts = try await Self.serverPosts(server, controller: controller, texts: Set(texts))
            #expect(posts.sorted { $0.key < $1.key }.map(\.value) == texts)
        }
    }

    /// A mutation queued by a run that ended offline goes out when a later
    /// run starts its outbox: the store file is all they share.
    @Test func whatAnEarlierRunQueuedGoesOutOnTheNextStart() async throws {
        try await withSetup { setup in
            // Run 1: offline. The post is queued and shown as pending.
            do {
                let store = try setup.store()
                let controller = setup.offlineController(store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await outbox.send(SendPost("local-1", "written offline"))
                try await Self.quit(controller, outbox, closing: store)
            }
            // Run 2: online.
            try await DemoServer.withRunning(.init(port: 0)) { server in
                let store = try setup.store()
                #expect(try await Self.rows(store).map(\.isPending) == [true])
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                let id = try #require(try await outbox.entries().first?.id)
                try await outbox.start()
                #expect(try await outbox.outcome(of: id).get().status == 201)
                #expect(try await Self.rows(store).map(\.isPending) == [false])
                #expect(try await Self.serverPosts(server, controller: controller, texts: ["written offline"]).count == 1)
                try await Self.quit(controller, outbox, closing: store)
            }
        }
    }

    /// Quitting right after sending: the grace covers every queued send of a
    /// lane, one after another, not only the one already under way.
    @Test func shutdownGivesQueuedSendsTheGrace() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                let texts = (1...3).map { "sent while quitting \($0)" }
                for (index, text) in texts.enumerated() { try await outbox.send(SendPost("local-\(index)", text)) }
                let report = await controller.shutdown(grace: .seconds(30))
                #expect(!report.graceExpired)
                #expect(try await outbox.entries().isEmpty)
                #expect(try await Self.rows(store).allSatisfy { !$0.isPending })
                await outbox.waitUntilIdle()
                let check = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                #expect(try await Self.serverPosts(server, controller: check, texts: Set(texts)).count == 3)
                _ = await check.shutdown(grace: .zero)
                try await store.close()
            }
        }
    }

    /// A lane pausing after a failure (a 503 here) does not hold the grace:
    /// shutdown ends the pause at once, and the entry stays queued.
    @Test func shutdownEndsALanesBackoffAtOnce() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let clock = ManualClock()
            let transport = FixtureTransport(["/posts": .status(503)])
            var configuration = NetworkController.Configuration(baseURL: URL(string: "http://h.test")!, transport: transport, observability: .init(notificationCenter: nil), environment: .init(clock: clock))
            configuration.store = store
            let controller = NetworkController(configuration: configuration)
            let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
            let events = Recorder(controller.events())
            let changes = Recorder(outbox.changes())
            try await outbox.send(SendPost("local-1", "into a 503"))
            // The controller's own retries wait out their delays on the clock
            // (each wake-up time is fixed before the retry is announced, so
            // moving the clock then wakes it); then the lane pauses.
            while let retry = try await events.next(where: { $0.kind == .retried || $0.kind.isTerminal }).delay {
                clock.advance(by: retry)
            }
            _ = try await changes.next { $0.step == .willRetry }
            // The lane's pause has begun: it sleeps on the clock beside the
            // deadline watch (armed by the first attempt for its 60 s idle timeout).
            await clock.sleepers(atLeast: 2)
            #expect(outbox.state.withLock { !$0.pausing.isEmpty }, "the lane pauses")
            let pausedAt = clock.elapsed
            let quitting = Task { await controller.shutdown(grace: .seconds(60)) }
            // Without the wake-up, only the grace (60 s of this clock) would end it.
            var stopped = true
            do {
                try await completes { await outbox.waitUntilIdle() }
            } catch {
                stopped = false
            }
            #expect(stopped, "the lane still pauses")
            #expect(outbox.state.withLock { $0.running.isEmpty })
            if !stopped { clock.advance(by: .seconds(3600)) }  // unblock a failing run
            await outbox.waitUntilIdle()
            #expect(clock.elapsed == pausedAt, "the pause ended without time passing")
            let report = await quitting.value
            #expect(!report.graceExpired)
            #expect(try await outbox.entries().count == 1)
            try await store.close()
        }
    }

    /// A refresh that lands while a post is pending replaces the table with
    /// the server's rows; the pending post is still there afterwards (its
    /// optimistic change is applied again in the refresh's transaction), and
    /// the commit later turns it into the server's post.
    @Test func aRefreshDoesNotUndoAPendingWrite() async throws {
        try await withSetup { setup in
            let store = try setup.store()
            let offline = setup.offlineController(store: store)
            let queued = Outbox(store: store, controller: offline, types: [SendPost.self])
            let id = try await queued.send(SendPost("local-1", "pending through a refresh"))
            _ = await offline.shutdown(grace: .zero)

            try await DemoServer.withRunning(.init(port: 0)) { server in
                let online = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let refreshed = try await online.perform(RefreshPosts())
                #expect((refreshed.written ?? 0) > 0)
                let afterRefresh = try await Self.rows(store)
                #expect(afterRefresh.contains(PostRow(localID: "local-1", serverID: nil, text: "pending through a refresh", isPending: true)))
                #expect(afterRefresh.count == (refreshed.written ?? 0) + 1)

                let outbox = Outbox(store: store, controller: online, types: [SendPost.self])
                try await outbox.start()
                let answer = try await outbox.outcome(of: id.id).get()
                #expect(answer.status == 201)
                let mine = try #require(try await Self.rows(store).first { $0.localID == "local-1" })
                #expect(!mine.isPending && mine.serverID != nil)
                // Once committed, a refresh no longer applies it: the server's row is the post.
                _ = try await online.perform(RefreshPosts())
                let final = try await Self.rows(store)
                #expect(!final.contains { $0.localID == "local-1" })
                #expect(final.filter { $0.text == "pending through a refresh" }.count == 1)
                _ = await online.shutdown(grace: .zero)
                await outbox.waitUntilIdle()
            }
            await queued.waitUntilIdle()
            try await store.close()
        }
    }

    /// A 401 holds the lane (the entry stays queued, undecided) until new
    /// credentials are in and `resumeHeld()` lets it go again: then it is sent
    /// with its key and accepted.
    @Test func a401HoldsTheLaneUntilCredentialsChange() async throws {
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                final class Token: Sendable {
                    private let stored = Mutex<String?>(nil)
                    var value: String? {
                        get { stored.withLock { $0 } }
                        set { stored.withLock { $0 = newValue } }
                    }
                }
                let token = Token()
                var configuration = NetworkController.Configuration(
                    baseURL: server.baseURL,
                    transport: AsyncHTTPClientTransport(),
                    adapters: [Credentials(for: server.baseURL) { token.value }],
                    observability: .init(notificationCenter: nil)
)
                configuration.store = store
                let controller = NetworkController(configuration: configuration)
                let outbox = Outbox(store: store, controller: controller, types: [CreateTask.self])
                let id = try await outbox.send(CreateTask(payload: "Call Ann"))
                // Held: nothing pending is being sent, and the entry is still there.
                let held = await Self.firstSnapshot(of: outbox) { !$0.heldLanes.isEmpty }
                #expect(held?.heldLanes == ["CreateTask"] && held?.pendingCount == 1 && held?.isSending == false)
                #expect(try await outbox.entries().map(\.id) == [id.id])

                token.value = "Basic " + Data("admin:secret".utf8).base64EncodedString()
                await outbox.resumeHeld()
                #expect(try await id.outcome().get().status == 201)
                #expect(try await outbox.entries().isEmpty)
                try await Self.quit(controller, outbox, closing: store)
            }
        }
    }

    /// A refused token refresh signs the user out and holds the lane; signing
    /// in again lets it go by itself (no `resumeHeld()`), and the entry is
    /// sent with its key and accepted.
    @Test func aLaneHeldByARefusedRefreshResumesWhenTheUserSignsInAgain() async throws {
        let serverClock = ManualClock()
        try await DemoServer.withRunning(.init(host: "127.0.0.1", port: 0, clock: serverClock)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let tokens = OAuth2TokenEndpoint(url: server.baseURL.appending(path: "oauth/token"), clientID: "tests")
                let authenticator = TokenAuthenticator(for: server.baseURL, refresher: .oauth2(tokens), refreshWindow: .zero, exempting: [tokens.url])
                let controller = NetworkController(
                    configuration: .init(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), authenticator: authenticator, observability: .init(notificationCenter: nil)),
                    store: store)
                let outbox = Outbox(store: store, controller: controller, types: [CreateTask.self])
                let signIn = { await authenticator.signIn(try await controller.perform(tokens.passwordGrant(username: "admin", password: "secret"))) }
                try await signIn()
                // Given a refresh token that is worthless (used elsewhere) and an expired access token
                let stale = try #require(await authenticator.currentCredential()?.refreshToken)
                var reuse = TransportRequest(url: tokens.url, method: .post)
                reuse.headers["Content-Type"] = "application/x-www-form-urlencoded"
                reuse.body = Data("grant_type=refresh_token&refresh_token=\(stale)".utf8)
                #expect(try await AsyncHTTPClientTransport().send(reuse).status == 200)
                serverClock.advance(by: .seconds(3601))

                // When a mutation goes out: 401, the refresh is refused, the lane is held
                let ticket = try await outbox.send(CreateTask(payload: "Call Ann"))
                let held = await Self.firstSnapshot(of: outbox) { !$0.heldLanes.isEmpty }
                #expect(held?.heldLanes == ["CreateTask"] && held?.pendingCount == 1)
                #expect(authenticator.isSignedOut)

                // Then signing in again sends it, with nothing else asked of the app
                try await signIn()
                #expect(try await ticket.outcome().get().status == 201)
                #expect(try await outbox.snapshot().heldLanes.isEmpty)
                #expect(try await outbox.entries().isEmpty)
                try await Self.quit(controller, outbox, closing: store)
            }
        }
    }

    /// Rows an older version queued that the new payload type cannot decode
    /// are surfaced as failed, with the reason; the launch goes on, other
    /// entries are sent, and the app can discard the failed one.
    @Test func aPayloadThatNoLongerDecodesIsSurfacedAsFailed() async throws {
        try await withSetup { setup in
            do {
                let store = try setup.store()
                let controller = setup.offlineController(store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await outbox.send(SendPost("local-1", "queued by version 1"))
                try await Self.quit(controller, outbox, closing: store)
            }
            try await DemoServer.withRunning(.init(port: 0)) { server in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPostV2.self])
                let old = try #require(try await outbox.entries().first?.id)
                try await outbox.start()
                guard case .failure(let error) = await outbox.outcome(of: old) else {
                    Issue.record("an undecodable payload was sent")
                    return
                }
                #expect(error.code == .decoding)
                let snapshot = try #require(await Self.firstSnapshot(of: outbox) { !$0.failed.isEmpty })
                #expect(snapshot.failed.map(\.id) == [old])
                #expect(snapshot.failed.first?.lastError == "it cannot be rebuilt: its payload cannot be decoded as SendPost.v1")
                // A new mutation in the same lane is not blocked by it.
                let fresh = try await outbox.send(SendPostV2(payload: .init(localID: "local-2", body: "from version 2", visibility: "all")))
                #expect(try await fresh.outcome().get().status == 201)
                try await outbox.discard(old)
                #expect(try await outbox.entries().isEmpty)
                try await Self.quit(controller, outbox, closing: store)
            }
        }
    }

    /// Lanes run in parallel: a lane whose first mutation waits (its answers
    /// are lost, again and again) does not hold back another lane.
    @Test func aLaneThatWaitsDoesNotHoldBackTheOthers() async throws {
        struct Slow: Mutation {
            static let typeName = "Slow"
            var payload: String
            init(payload: String) { self.payload = payload }
            var lane: String { "slow" }
            var request: NetworkRequest { .post("posts", json: ["text": payload]) }
            func applyOptimistically(_ db: Database) throws {}
            func commit(_ response: NetworkResponse, _ db: Database) throws {}
            func rollback(_ error: DepotError, _ db: Database) throws {}
        }
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self, Slow.self, CreateTaskWithAuth.self])
                // Every answer on /posts is lost for a while: the slow lane keeps retrying.
                try await Self.dropResponses(1_000, on: "/posts", controller: controller)
                let slow = try await outbox.send(Slow(payload: "stuck"))
                _ = await Self.firstSnapshot(of: outbox) { $0.isSending }
                // Another lane, another route: delivered while the slow one waits.
                let task = try await outbox.send(CreateTaskWithAuth(payload: "Call Bob"))
                #expect(try await task.outcome().get().status == 201)
                #expect(try await outbox.entries().map(\.id) == [slow.id])
                try await Self.quit(controller, outbox, closing: store)
            }
        }
    }
}
