import Depot
import DepotTesting
import Foundation
import GRDB
import Synchronization
import Testing
@testable import DepotStore

/// Waiters of an entry whose attempt ends while the store closes: the close
/// told every waiter of an entry *not* in flight; the lane sending this one
/// must tell its waiters itself, whatever the attempt's answer.
@Suite(.timeLimit(.minutes(1))) struct OutboxCloseTests {
    /// A transport whose one request waits for the test, then answers `status`.
    final class GatedTransport: Transport {
        let status: Int
        let started: AsyncStream<Void>
        let startedContinuation: AsyncStream<Void>.Continuation
        let gate: AsyncStream<Void>
        let gateContinuation: AsyncStream<Void>.Continuation

        init(status: Int) {
            self.status = status
            (started, startedContinuation) = AsyncStream<Void>.makeStream()
            (gate, gateContinuation) = AsyncStream<Void>.makeStream()
        }

        func send(_ request: TransportRequest) async throws -> TransportResponse {
            startedContinuation.yield()
            for await _ in gate { break }
            return TransportResponse(status: status, headers: ["Content-Length": "0"], body: .empty)
        }
    }

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

    /// 409 ("still processing", tried again after a backoff) or 401 (the lane
    /// is held), arriving after the close told the waiters it could.
    @Test(arguments: [409, 401])
    func aWaiterOfTheEntryInFlightWhenTheStoreClosedIsAnswered(status: Int) async throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try Store(path: folder.appending(path: "app.sqlite").path, migrator: DatabaseMigrator())
        let transport = GatedTransport(status: status)
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://gated.test")!, transport: transport, observability: .init(notificationCenter: nil)))
        let outbox = Outbox(store: store, controller: controller, types: [Slow.self])

        // Given an entry being sent, and a waiter of it
        let ticket = try await outbox.send(Slow(payload: "x"))
        var started = transport.started.makeAsyncIterator()
        _ = await started.next()
        let key = ticket.id.rawValue
        let executor = SuspensionExecutor()
        let waiting = Task(executorPreference: executor) { await ticket.outcome() }
        await executor.suspended()  // the waiter has registered and waits
        #expect(outbox.state.withLock { $0.waiters[key] != nil })

        // When the store closes, then the server answers
        try await store.close()
        transport.gateContinuation.yield()
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
