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
}
