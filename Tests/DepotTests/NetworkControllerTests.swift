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
                let events = controller.events
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
                let events = controller.events
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
        let transport = ScriptedTransport { request in
            for _ in 0..<3 { await Task.yield() }
            return TransportResponse(status: 200, headers: ["Content-Length": "19"], body: TransportBody(data: Data(#"{"message":"hello"}"#.utf8)))
        }
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://a.test")!, transport: transport, concurrencyPolicy: .fixed(3), notificationCenter: nil))
        await withTaskGroup(of: Void.self) { group in
            for n in 0..<300 {
                group.addTask { _ = try? await controller.perform(FetchHello(path: "/hello/\(n)")) }
                let ticket = controller.enqueue(FetchHello(path: "/other/\(n)"))
                if n % 3 == 0 { ticket.cancel() }
                if n % 50 == 49 { controller.cancelAll() }
            }
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
                let events = controller.events
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
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: { $0.concurrencyPolicy = .fixed(1) }) { controller in
                let events = controller.events
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
                let events = controller.events
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

    // MARK: Central control

    @Test func pauseResumeAndCancelByCategory() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                controller.pause(category: .images)
                #expect(controller.pausedCategories == [.images])
                let image = controller.enqueue(FetchHello(.hello, variant: "image", category: .images))
                let doomed = controller.enqueue(FetchHello(.hello, variant: "doomed", category: .images))
                let output = try await controller.perform(FetchHello())
                #expect(output.message == "hello")
                #expect(controller.activity.queued == 2)
                #expect(!image.isFinished)
                doomed.cancel()
                controller.resume(category: .images)
                await controller.waitUntilIdle()
                #expect(image.outcome == .succeeded)
                #expect(doomed.outcome == .cancelled)
                #expect(server.requestCount(for: .hello) == 2)

                let hung = controller.enqueue(FetchHello(.hang, category: .images))
                let bystander = controller.enqueue(FetchHello(.gated("bystander")))
                controller.cancel(category: .images)
                server.openGate("bystander")
                await controller.waitUntilIdle()
                #expect(hung.outcome == .cancelled)
                #expect(bystander.outcome == .succeeded)
            }
        }
    }

    @Test func changingTheLimitStartsQueuedWork() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: { $0.concurrencyPolicy = .fixed(0) }) { controller in
                let tickets = (0..<3).map { controller.enqueue(FetchHello(.hello, variant: "\($0)")) }
                #expect(controller.activity.queued == 3)
                controller.concurrencyLimit = 2
                #expect(controller.concurrencyLimit == 2)
                await controller.waitUntilIdle()
                #expect(tickets.allSatisfy { $0.outcome == .succeeded })
            }
        }
    }

    @Test func cancelAllCancelsEverything() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: { $0.concurrencyPolicy = .fixed(1) }) { controller in
                let tickets = (0..<4).map { controller.enqueue(FetchHello(.hang, variant: "\($0)")) }
                controller.cancelAll()
                await controller.waitUntilIdle()
                #expect(tickets.allSatisfy { $0.outcome == .cancelled })
            }
        }
    }

    // MARK: Shutdown

    @Test func shutdownLetsAPostFinishAndCancelsTheRest() async throws {
        try await withServer { server in
            let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), notificationCenter: nil))
            let events = controller.events
            let post = controller.enqueue(PostEcho(.gated("post"), text: "must arrive", exitPolicy: .finish))
            let avatars = (0..<3).map { controller.enqueue(FetchHello(.hang, variant: "\($0)", category: .images)) }
            let shutdown = Task { await controller.shutdown(grace: .seconds(30)) }
            var cancelled = 0
            for await event in events {
                if case .cancelled = event.detail { cancelled += 1 }
                if cancelled == 3 { break }
            }
            #expect(!post.isFinished)
            server.openGate("post")
            let report = await shutdown.value
            #expect(report.finished == 1)
            #expect(report.cancelled == 3)
            #expect(!report.graceExpired)
            #expect(post.outcome == .succeeded)
            #expect(avatars.allSatisfy { $0.outcome == .cancelled })
            #expect(server.requestCount(for: .gated("post")) == 1)

            let late = await DepotError.from { _ = try await controller.perform(FetchHello()) }
            #expect(late?.code == .shutDown)
        }
    }

    @Test func shutdownCancelsFinishWorkWhenGraceRunsOut() async throws {
        let clock = ManualClock()
        let transport = ScriptedTransport { _ in
            try await clock.sleep(for: .seconds(1_000_000))  // until cancelled
            return TransportResponse(status: 200, body: .empty)
        }
        let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://depot.test")!, transport: transport, clock: clock, notificationCenter: nil))
        let post = controller.enqueue(PostEcho(text: "slow", exitPolicy: .finish))
        let shutdown = Task { await controller.shutdown(grace: .seconds(5)) }
        // The post's transfer, its watchdog and the grace period all wait on the clock.
        await clock.sleepers(atLeast: 3)
        clock.advance(by: .seconds(5))
        let report = await shutdown.value
        #expect(report.graceExpired)
        #expect(report.cancelled == 1)
        #expect(post.outcome == .cancelled)
    }

    @Test func aCancelledShutdownStillEndsFinishWork() async throws {
        // Cancelling the caller ends the grace period early: the `.finish` work left
        // is cancelled like at the end of the grace, never left queued for good.
        // (Which of the grace's two waits ends first is a race: hence the rounds.)
        for _ in 0..<30 {
            let clock = ManualClock()
            let transport = ScriptedTransport { _ in TransportResponse(status: 200, body: .empty) }
            let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://depot.test")!, transport: transport, clock: clock, notificationCenter: nil))
            controller.pause(category: "held")
            let held = controller.enqueue(FetchHello(category: "held", exitPolicy: .finish))
            let shutdown = Task { await controller.shutdown(grace: .seconds(60)) }
            await clock.sleepers(atLeast: 1)  // the grace period
            shutdown.cancel()
            let report = await shutdown.value
            #expect(held.outcome == .cancelled)
            #expect(report.cancelled == 1)
            #expect(report.graceExpired)
            #expect(controller.activity.queued == 0)
        }
    }

    @Test(.timeLimit(.minutes(1))) func aReleasedControllerStillCompletesHeldWork() async throws {
        var ticket: Ticket?
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Hello, DepotError>, Never>) in
            // Given work held in a paused category when the app lets go of its controller
            let transport = ScriptedTransport { _ in TransportResponse(status: 200, body: .empty) }
            let controller = NetworkController(configuration: .init(baseURL: URL(string: "http://depot.test")!, transport: transport, notificationCenter: nil))
            controller.pause(category: "held")
            ticket = controller.enqueue(FetchHello(category: "held")) { continuation.resume(returning: $0) }
        }
        // Then its completion is still called, with the reason
        guard case .failure(let error) = result else {
            Issue.record("held work succeeded without a controller: \(result)")
            return
        }
        #expect(error.code == .shutDown)
        #expect(ticket?.isFinished == true)
    }

    @Test func concurrentShutdownsShareOneReport() async throws {
        try await withServer { server in
            let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: URLSessionTransport(), notificationCenter: nil))
            let hung = controller.enqueue(FetchHello(.hang))
            async let first = controller.shutdown(grace: .seconds(30))
            async let second = controller.shutdown(grace: .seconds(30))
            let (a, b) = await (first, second)
            #expect(a == b)
            #expect(a.cancelled == 1)
            #expect(!a.graceExpired)
            #expect(hung.outcome == .cancelled)
            #expect(controller.isShutDown)
        }
    }

    @Test func shutdownOfAnIdleControllerReportsNothing() async throws {
        let controller = NetworkController(configuration: .init(transport: FileTransport(), notificationCenter: nil))
        let report = await controller.shutdown(grace: .zero)
        #expect(report == ShutdownReport())
        let rejected = await DepotError.from { _ = try await controller.perform(FetchRaw(url: URL(fileURLWithPath: "/dev/null"))) }
        #expect(rejected?.code == .shutDown)
        let malformed = await DepotError.from { _ = try await controller.perform(FetchHello(path: "http://bad host/")) }
        #expect(malformed?.code == .shutDown)
        #expect(await controller.shutdown(grace: .zero) == ShutdownReport())  // rejections are not counted
    }

    // MARK: Events, notifications, logs

    @Test func eventsTellTheWholeStory() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let events = controller.events
                let ticket = controller.enqueue(FetchHello())
                var kinds: [String] = []
                for await event in events where event.ticket == ticket.id {
                    switch event.detail {
                    case .enqueued(let priority, let category):
                        #expect(priority == .normal && category == .default)
                        kinds.append("enqueued")
                    case .started(let attempt): kinds.append("started\(attempt)")
                    case .progress: if kinds.last != "progress" { kinds.append("progress") }
                    case .finished(let finished):
                        #expect(finished.status == 200)
                        #expect(finished.bytes == 19)
                        #expect(finished.sample?.bytes == 19)
                        kinds.append("finished")
                    default: kinds.append("\(event.kind)")
                    }
                    if kinds.last == "finished" { break }
                }
                #expect(kinds == ["enqueued", "started1", "progress", "finished"])
            }
        }
    }

    /// Progress reaches every ticket of a transfer, also one that joined it while
    /// it ran, and stops at a ticket that was cancelled.
    @Test func progressReachesJoinedTicketsAndStopsAtCancelledOnes() async throws {
        let feed = ChunkFeed()
        let transport = ScriptedTransport { _ in
            TransportResponse(status: 200, body: TransportBody(unfolding: { await feed.next() }))
        }
        let controller = NetworkController(configuration: .init(transport: transport, notificationCenter: nil))
        let url = URL(string: "http://a.test/big")!
        var events = controller.events.makeAsyncIterator()
        func next(_ kind: String, of ticket: Ticket) async -> NetworkEvent? {
            while let event = await events.next() {
                if event.ticket == ticket.id, "\(event.kind)".hasPrefix(kind) { return event }
            }
            return nil
        }
        var progressFor: [Ticket.ID: [Int64]] = [:]
        let first = controller.enqueue(FetchRaw(url: url))
        _ = await next("started", of: first)
        await feed.send(Data(count: 10))
        let firstChunk = await next("progress", of: first)
        guard case .progress(let progress) = firstChunk?.detail else {
            Issue.record("no progress event for the first chunk")
            return
        }
        #expect(progress.received == 10)

        let joined = controller.enqueue(FetchRaw(url: url))
        let cancelled = controller.enqueue(FetchRaw(url: url))
        _ = await next("coalesced", of: cancelled)
        cancelled.cancel()
        _ = await next("cancelled", of: cancelled)

        await feed.send(Data(count: 20))
        await feed.send(nil)
        var finished: Set<Ticket.ID> = []
        while finished.count < 2, let event = await events.next() {
            switch event.detail {
            case .progress(let progress): progressFor[try #require(event.ticket), default: []].append(progress.received)
            case .finished: finished.insert(try #require(event.ticket))
            default: break
            }
        }
        #expect(finished == [first.id, joined.id])
        #expect(progressFor[first.id] == [30])
        #expect(progressFor[joined.id] == [30])
        #expect(progressFor[cancelled.id] == nil)
        #expect(joined.progress.received == 30)
        #expect(cancelled.progress.received == 0)
        _ = await controller.shutdown(grace: .zero)
    }

    @Test func eventsArePostedAsNotifications() async throws {
        try await withServer { server in
            let center = NotificationCenter()
            let seen = Locked<[(name: Notification.Name, operation: String, error: DepotError.Code?, hasObject: Bool, keys: Int)]>([])
            let names: [Notification.Name] = [.depotOperationEnqueued, .depotOperationStarted, .depotOperationFinished, .depotOperationFailed]
            let observers = names.map { name in
                center.addObserver(forName: name, object: nil, queue: nil) { note in
                    let event = note.userInfo?[NetworkEvent.UserInfoKey.event] as? NetworkEvent
                    let error = note.userInfo?[NetworkEvent.UserInfoKey.error] as? DepotError
                    if let event, event.notificationName == note.name {
                        seen.withLock { $0.append((note.name, event.operation ?? "", error?.code, note.object != nil, note.userInfo?.count ?? 0)) }
                    }
                }
            }
            defer { observers.forEach(center.removeObserver) }
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: { $0.notificationCenter = center }) { controller in
                _ = try await controller.perform(FetchHello())
                _ = try? await controller.perform(FetchHello(.status(404)))
            }
            let recorded = seen.value
            #expect(recorded.map(\.name) == [.depotOperationEnqueued, .depotOperationStarted, .depotOperationFinished, .depotOperationEnqueued, .depotOperationStarted, .depotOperationFailed])
            #expect(recorded.allSatisfy { $0.operation == "FetchHello" })
            // Only the failure carries the error under its own key.
            #expect(recorded.map(\.error) == [nil, nil, nil, nil, nil, .notFound])
            // Posted without an object (Events/Notifications.swift says why).
            #expect(recorded.allSatisfy { !$0.hasObject })
            #expect(recorded.map(\.keys) == [1, 1, 1, 1, 1, 2])
        }
    }

    @Test func logsCarryMetadataAndNeverSecrets() async throws {
        let sink = LogSink()
        var logger = Logger(label: "depot.test") { _ in sink }
        logger.logLevel = .trace
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: {
                $0.logger = logger
                $0.adapters = [Credentials.bearer("s3cret-token", for: server.baseURL), DefaultHeaders(["Cookie": "session=hunter2"])]
            }) { controller in
                _ = try await controller.perform(FetchRaw(url: server.url(for: .echoHeaders)))
            }
        }
        let lines = sink.lines
        #expect(lines.contains { $0.contains("finished") && $0.contains("depot.operation=FetchRaw") && $0.contains("http.status=200") })
        #expect(lines.contains { $0.contains("<redacted>") })
        #expect(!lines.contains { $0.contains("s3cret-token") || $0.contains("hunter2") })
    }

    @Test func relativePathWithoutBaseURLIsAnInvalidRequest() async throws {
        try await withController(FileTransport()) { controller in
            let error = await DepotError.from { _ = try await controller.perform(FetchHello()) }
            #expect(error?.code == .invalidRequest)
            #expect(error?.operation == "FetchHello")
        }
    }
}

/// A log handler that keeps every line with its metadata.
final class LogSink: LogHandler, Sendable {
    private let storage = Locked<[String]>([])
    var lines: [String] { storage.value }

    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    func log(event: LogEvent) {
        let metadata = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        storage.withLock { $0.append("\(event.level) \(event.message) \(metadata)") }
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
