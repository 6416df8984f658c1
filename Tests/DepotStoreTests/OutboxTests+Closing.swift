import DemoServer
import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// Closing the store under an outbox that is sending.
extension OutboxTests {
    /// Closing the store while its lanes send, with no shutdown and no
    /// `waitUntilIdle()` first: the close returns, every ticket is answered
    /// (sent, or "stays queued"), and the next run sends what was left, each
    /// post once on the server and none left pending.
    @Test func closingTheStoreUnderDeliveryLosesNothing() async throws {
        let texts = (0..<20).map { "closed under delivery \($0)" }
        try await DemoServer.withRunning(.init(port: 0)) { server in
            try await withSetup { setup in
                // Run 1: closed while sending.
                do {
                    let store = try setup.store()
                    let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                    let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                    var tickets: [OutboxTicket] = []
                    for (index, text) in texts.enumerated() {
                        tickets.append(try await outbox.send(SendPost("local-\(index)", text)))
                    }
                    // Waiting before the close, and after it.
                    let executor = SuspensionExecutor()
                    let early = Task(executorPreference: executor) { [tickets] in
                        await withTaskGroup(of: Result<NetworkResponse, DepotError>.self) { group in
                            for ticket in tickets.prefix(10) { group.addTask { await ticket.outcome() } }
                            return await group.reduce(into: []) { $0.append($1) }
                        }
                    }
                    // Each early waiter has registered (or found its outcome) and waits.
                    await executor.suspended()
                    let keys = tickets.prefix(10).map(\.id.rawValue)
                    #expect(outbox.state.withLock { state in keys.allSatisfy { state.waiters[$0] != nil || state.outcomes[$0] != nil } })
                    try await store.close()
                    var outcomes = await early.value
                    for ticket in tickets.dropFirst(10) { outcomes.append(await ticket.outcome()) }
                    let sent = outcomes.filter { (try? $0.get()) != nil }.count
                    for case .failure(let error) in outcomes {
                        #expect(error.code == .storage && error.detail == Outbox.storeClosed.detail, "\(error)")
                    }
                    #expect(sent < texts.count, "the close came after every send: nothing was tested")
                    _ = await controller.shutdown(grace: .zero)
                }
                // Run 2: what was left goes out.
                let store = try setup.store()
                let controller = setup.controller(AsyncHTTPClientTransport(), baseURL: server.baseURL, store: store)
                let outbox = Outbox(store: store, controller: controller, types: [SendPost.self])
                try await outbox.start()
                await outbox.waitUntilIdle()
                #expect(try await outbox.entries().isEmpty)
                #expect(try await Self.rows(store).map(\.isPending) == Array(repeating: false, count: texts.count))
                let posts = try await Self.serverPosts(server, controller: controller, texts: Set(texts))
                #expect(posts.values.sorted() == texts.sorted())
                _ = await controller.shutdown(grace: .zero)
                try await store.close()
            }
        }
    }

    /// Waiters of an entry whose attempt ends while the store closes: the close
    /// told every waiter of an entry *not* in flight; the lane sending this one
    /// must tell its waiters itself, whatever the attempt's answer: 409 ("still
    /// processing", tried again after a backoff) or 401 (the lane is held),
    /// arriving after the close told the waiters it could.
    @Test(arguments: [409, 401])
    func aWaiterOfTheEntryInFlightWhenTheStoreClosedIsAnswered(status: Int) async throws {
        /// A mutation the server answers 409 to while it works on it (tried again).
        struct Slow: Mutation {
            static let typeName = "Slow"
            var payload: String
            init(payload: String) { self.payload = payload }
            var request: NetworkRequest { .post("slow", json: ["name": payload]) }
            func isStillProcessing(_ response: NetworkResponse) -> Bool { response.status == 409 }
            func applyOptimistically(_ db: Database) throws {}
            func commit(_ response: NetworkResponse, _ db: Database) throws {}
            func rollback(_ error: DepotError, _ db: Database) throws {}
        }
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "app.sqlite").path, migrator: DatabaseMigrator())
        let transport = ScriptedTransport(.status(status).gated)
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://gated.test")!, transport: transport, observability: .init(notificationCenter: nil)))
        let outbox = Outbox(store: store, controller: controller, types: [Slow.self])

        // Given an entry being sent, and a waiter of it
        let ticket = try await outbox.send(Slow(payload: "x"))
        try await transport.waitingAtGate(atLeast: 1)
        let key = ticket.id.rawValue
        let executor = SuspensionExecutor()
        let waiting = Task(executorPreference: executor) { await ticket.outcome() }
        await executor.suspended()  // the waiter has registered and waits
        #expect(outbox.state.withLock { $0.waiters[key] != nil })

        // When the store closes, then the server answers
        try await store.close()
        transport.letThrough(1)
        await outbox.waitUntilIdle()

        // Then the waiter hears that the entry stays queued
        let stranded = outbox.state.withLock { $0.waiters[key] != nil }
        #expect(!stranded, "the waiter was never answered: nothing in this process will decide the entry")
        if !stranded {
            let outcome = await waiting.value
            #expect(outcome.failure?.detail == Outbox.storeClosed.detail)
        }
        _ = await controller.shutdown(grace: .zero)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
