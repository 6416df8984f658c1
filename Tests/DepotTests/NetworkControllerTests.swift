import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import Logging
import Testing

@Suite(.timeLimit(.minutes(1))) struct NetworkControllerTests {
    // MARK: Completion delivery

    @MainActor
    final class CompletionRecorder {
        var calls: [String: Int] = [:]
        var results: [String: Result<Hello, DepotError>] = [:]
        var enqueueReturned = false
        var onCall: () -> Void = {}

        func record(_ name: String) -> @MainActor @Sendable (Result<Hello, DepotError>) -> Void {
            { result in
                MainActor.assertIsolated()
                #expect(self.enqueueReturned, "completion for \(name) ran before enqueue returned")
                self.calls[name, default: 0] += 1
                self.results[name] = result
                self.onCall()
            }
        }

        func code(_ name: String) -> DepotError.Code? {
            if case .failure(let error) = results[name] { return error.code }
            return nil
        }
    }

    @MainActor
    @Test func completionRunsOnMainActorAsynchronouslyExactlyOnce() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let recorder = CompletionRecorder()
                let expected = ["ok", "coalesced", "notFound", "cancelled", "dependent", "badPath"]
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    recorder.onCall = {
                        if recorder.calls.values.reduce(0, +) == expected.count { done.resume() }
                    }
                    controller.enqueue(FetchHello(.gated("a")), completion: recorder.record("ok"))
                    controller.enqueue(FetchHello(.gated("a")), completion: recorder.record("coalesced"))
                    let missing = controller.enqueue(FetchHello(.status(404)), completion: recorder.record("notFound"))
                    controller.enqueue(FetchHello(.hang), completion: recorder.record("cancelled")).cancel()
                    controller.enqueue(FetchHello(), after: [missing], completion: recorder.record("dependent"))
                    controller.enqueue(FetchHello(path: "http://bad host/"), completion: recorder.record("badPath"))
                    recorder.enqueueReturned = true
                    server.openGate("a")
                }
                // Every completion exactly once, also after the queue drained: a later
                // operation's completion reaches the main actor after any stray second call.
                await controller.waitUntilIdle()
                await withCheckedContinuation { (sentinel: CheckedContinuation<Void, Never>) in
                    controller.enqueue(FetchHello(.status(404))) { _ in sentinel.resume() }
                }
                #expect(recorder.calls == Dictionary(uniqueKeysWithValues: expected.map { ($0, 1) }))
                #expect((try? recorder.results["ok"]?.get()) == Hello(message: "hello"))
                #expect((try? recorder.results["coalesced"]?.get()) == Hello(message: "hello"))
                #expect(recorder.code("notFound") == .notFound)
                #expect(recorder.code("cancelled") == .cancelled)
                #expect(recorder.code("dependent") == .dependencyFailed)
                #expect(recorder.code("badPath") == .invalidRequest)
            }
        }
    }

    @MainActor
    final class SearchScreen {
        var current: Ticket?
        var shown: [String] = []
        var stale = 0
        var done: CheckedContinuation<Void, Never>?
        var calls = 0
    }

    @MainActor
    @Test func onlyTheCurrentSearchIsShown() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let screen = SearchScreen()
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    screen.done = done
                    // Ten keystrokes: each search cancels the one before.
                    for query in 1...10 {
                        screen.current?.cancel()
                        screen.current = controller.enqueue(FetchHello(.gated("q\(query)"))) { ticket, result in
                            screen.calls += 1
                            if ticket == screen.current, case .success(let hello) = result {
                                screen.shown.append("\(query): \(hello.message)")
                            } else {
                                screen.stale += 1
                            }
                            if screen.calls == 10 { screen.done?.resume() }
                        }
                    }
                    for query in 1...10 { server.openGate("q\(query)") }
                }
                #expect(screen.shown == ["10: hello"])
                #expect(screen.stale == 9)
            }
        }
    }

    @Test func performReturnsTheOutputAndThrowsDepotErrors() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let output = try await controller.perform(FetchHello())
                #expect(output.message == "hello")
                await #expect(throws: DepotError.self) { _ = try await controller.perform(FetchHello(.status(500))) }
            }
        }
    }

    @Test func cancellingThePerformingTaskCancelsTheOperation() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let events = controller.events()
                let task = Task { try await controller.perform(FetchHello(.hang)) }
                for await event in events {
                    if case .started = event.detail { break }
                }
                task.cancel()
                let result = await task.result
                #expect((result.failureValue as? DepotError)?.code == .cancelled)
                await controller.waitUntilIdle()
                #expect(controller.activity.running == 0)
            }
        }
    }

    // MARK: Coalescing and promotion

    @Test func fiveIdenticalRefreshesSendOneRequest() async throws {
        try await withServer { server in
            try await withController(AsyncHTTPClientTransport(), baseURL: server.baseURL) { controller in
                let events = controller.events()
                let results = try await withThrowingTaskGroup(of: Hello.self) { group in
                    for _ in 0..<5 { group.addTask { try await controller.perform(FetchHello(.gated("refresh"))) } }
                    var coalesced = 0
                    for await event in events {
                        if case .coalesced = event.detail { coalesced += 1 }
                        if coalesced == 4 { break }
                    }
                    server.openGate("refresh")
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(results == Array(repeating: Hello(message: "hello"), count: 5))
                #expect(server.requestCount(for: .gated("refresh")) == 1)
            }
        }
    }

    /// Cancellations racing launches and ends leave no bookkeeping behind.
    @Test func theControllerForgetsEveryJobOnceIdle() async throws {
        // Every request waits at the gate: one goes on per round, so transfers
        // end while others launch and are cancelled, some at the gate.
        let transport = ScriptedTransport(.status(200, body: Data(#"{"message":"hello"}"#.utf8)).gated)
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://a.test")!, transport: transport, limits: .init(concurrency: .fixed(3)), observability: .init(notificationCenter: nil)))
        await withTaskGroup(of: Void.self) { group in
            for n in 0..<300 {
                group.addTask { _ = try? await controller.perform(FetchHello(path: "/hello/\(n)")) }
                let ticket = controller.enqueue(FetchHello(path: "/other/\(n)"))
                if n % 3 == 0 { ticket.cancel() }
                if n % 50 == 49 { controller.cancelAll() }
                transport.letThrough(1)
            }
            transport.openGate()
        }
        await controller.waitUntilIdle()
        let leftovers = controller.state.withLock { state in
            state.running.count + state.records.count
        }
        #expect(leftovers == 0)
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func mutationsAreNeverCoalesced() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                // The gate holds both POSTs, so they are queued together: a coalescing
                // bug cannot hide behind the first finishing before the second arrives.
                let events = controller.events()
                async let first = controller.perform(PostEcho(.gated("mutation"), text: "a"))
                async let second = controller.perform(PostEcho(.gated("mutation"), text: "a"))
                var started = 0
                var coalesced = 0
                for await event in events {
                    switch event.detail {
                    case .started: started += 1
                    case .coalesced: coalesced += 1
                    default: break
                    }
                    if started == 2 || coalesced > 0 { break }
                }
                server.openGate("mutation")
                _ = try await (first, second)
                #expect(coalesced == 0)
                #expect(started == 2)
                #expect(server.requestCount(for: .gated("mutation")) == 2)
            }
        }
    }

    @Test func moreUrgentDuplicatePromotesTheQueuedOne() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: { $0.limits.concurrency = .fixed(1) }) { controller in
                let events = controller.events()
                let blocker = controller.enqueue(FetchHello(.gated("slot")))
                let avatar = controller.enqueue(FetchHello(.hello, variant: "avatar", priority: .veryLow))
                let other = controller.enqueue(FetchHello(.hello, variant: "other", priority: .normal))
                let urgent = controller.enqueue(FetchHello(.hello, variant: "avatar", priority: .high))
                server.openGate("slot")
                var started: [Ticket.ID] = []
                var promoted = false
                for await event in events {
                    switch event.detail {
                    case .started: started.append(try #require(event.ticket))
                    case .promoted(let from, let to): promoted = from == .veryLow && to == .high
                    default: break
                    }
                    if started.count == 4 { break }  // blocker, then avatar+urgent together, then other
                }
                #expect(promoted)
                #expect(started.first == blocker.id)
                let avatarStart = try #require(started.firstIndex(of: avatar.id))
                #expect(started.firstIndex(of: urgent.id) != nil)
                #expect(avatarStart < started.firstIndex(of: other.id)!)
            }
        }
    }

    // MARK: Dependencies

    @Test func dependencyFailureCarriesTheCause() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let login = controller.enqueue(FetchHello(.status(401)))
                let error = await DepotError.from { _ = try await controller.perform(FetchHello(), after: [login]) }
                #expect(error?.code == .dependencyFailed)
                #expect((error?.underlying as? DepotError)?.code == .unauthorized)
                #expect(error?.description.contains("401 Unauthorized") == true)
                // A dependency that already failed fails the dependent at once.
                let again = await DepotError.from { _ = try await controller.perform(FetchHello(), after: [login]) }
                #expect(again?.code == .dependencyFailed)
                #expect(server.requestCount(for: .hello) == 0)
            }
        }
    }

    @Test func dependentsRunAfterTheirDependenciesSucceed() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let events = controller.events()
                let first = controller.enqueue(FetchHello(.gated("first")))
                let second = controller.enqueue(FetchHello(.hello, variant: "second"), after: [first])
                #expect(controller.activity.blocked == 1)
                server.openGate("first")
                var order: [Ticket.ID] = []
                for await event in events {
                    if case .finished = event.detail { order.append(try #require(event.ticket)) }
                    if order.count == 2 { break }
                }
                #expect(order == [first.id, second.id])
            }
        }
    }

    @Test func relativePathWithoutBaseURLIsAnInvalidRequest() async throws {
        try await withController(FileTransport()) { controller in
            let error = await DepotError.from { _ = try await controller.perform(FetchHello()) }
            #expect(error?.code == .invalidRequest)
            #expect(error?.operation == "FetchHello")
        }
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
