import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import DepotTesting
import Foundation
import Logging
import Testing

/// What the controller tells observers: events, notifications and logs.
@Suite(.timeLimit(.minutes(1))) struct NetworkEventTests {
    // MARK: Events, notifications, logs

    @Test func eventsTellTheWholeStory() async throws {
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL) { controller in
                let events = controller.events()
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
        let controller = NetworkController(configuration: .init(transport: transport, observability: .init(notificationCenter: nil)))
        let url = URL(string: "http://a.test/big")!
        var events = controller.events().makeAsyncIterator()
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
            let seen = Locked<[(name: Notification.Name, operation: String, error: DepotError.Code?, object: ObjectIdentifier?, keys: Int)]>([])
            let names: [Notification.Name] = [.depotOperationEnqueued, .depotOperationStarted, .depotOperationFinished, .depotOperationFailed]
            let observers = names.map { name in
                center.addObserver(forName: name, object: nil, queue: nil) { note in
                    let event = note.userInfo?[NetworkEvent.UserInfoKey.event] as? NetworkEvent
                    let error = note.userInfo?[NetworkEvent.UserInfoKey.error] as? DepotError
                    if let event, event.notificationName == note.name {
                        seen.withLock { $0.append((note.name, event.operation ?? "", error?.code, note.object.map { ObjectIdentifier($0 as AnyObject) }, note.userInfo?.count ?? 0)) }
                    }
                }
            }
            defer { observers.forEach(center.removeObserver) }
            // An observer of another controller on the same center hears none of them
            let other = NetworkController(configuration: .init(transport: FixtureTransport(), observability: .init(notificationCenter: center)))
            let overheard = Locked(0)
            let otherObserver = center.addObserver(forName: .depotOperationEnqueued, object: other, queue: nil) { _ in overheard.withLock { $0 += 1 } }
            defer { center.removeObserver(otherObserver) }
            var poster: ObjectIdentifier?
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: { $0.observability.notificationCenter = center }) { controller in
                poster = ObjectIdentifier(controller)
                _ = try await controller.perform(FetchHello())
                _ = try? await controller.perform(FetchHello(.status(404)))
            }
            _ = await other.shutdown(grace: .zero)
            let recorded = seen.value
            #expect(recorded.map(\.name) == [.depotOperationEnqueued, .depotOperationStarted, .depotOperationFinished, .depotOperationEnqueued, .depotOperationStarted, .depotOperationFailed])
            #expect(recorded.allSatisfy { $0.operation == "FetchHello" })
            // Only the failure carries the error under its own key.
            #expect(recorded.map(\.error) == [nil, nil, nil, nil, nil, .notFound])
            // Posted with their controller as the object, so one controller can be followed
            #expect(poster != nil && recorded.allSatisfy { $0.object == poster })
            #expect(overheard.value == 0)
            #expect(recorded.map(\.keys) == [1, 1, 1, 1, 1, 2])
        }
    }

    @Test func logsCarryMetadataAndNeverSecrets() async throws {
        let sink = LogSink()
        var logger = Logger(label: "depot.test") { _ in sink }
        logger.logLevel = .trace
        try await withServer { server in
            try await withController(URLSessionTransport(), baseURL: server.baseURL, configure: {
                $0.observability.logger = logger
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
