import DemoServer
@testable import Depot
import DepotTesting
import Foundation
import Synchronization
import Testing

/// Delayable downloads in byte ranges (``DelayablePacing/rangeBytes``), over
/// real HTTP on 127.0.0.1 with every transport.
@Suite(.timeLimit(.minutes(1))) struct ByteRangesTests {
    static let filler = Data(repeating: UInt8(ascii: "b"), count: 20_000)

    @Test(arguments: TransportKind.allCases)
    func aDelayableDownloadComesInRangesAndWhole(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make(), baseURL: server.baseURL) { controller in
                controller.assumeLinkMeasured()
                let response = try await controller.perform(FetchRaw(url: server.url(for: .bytes(20_000)), priority: .low))
                #expect(response.status == 200)
                #expect(response.body == Self.filler)
                #expect(response.headers["Content-Length"] == "20000")
                #expect(response.headers["Content-Range"] == nil)
                // 8 KB, 8 KB and the rest, the later ones tied to the first's ETag.
                #expect(server.requestCount(for: .bytes(20_000)) == 3)
                let last = try #require(server.lastRequestHeaders(for: .bytes(20_000)))
                #expect(last["range"] == "bytes=16384-19999")
                #expect(last["if-range"] == "\"b20000\"")
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func importantWorkAndRangesTurnedOffComeInOneRequest(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make(), baseURL: server.baseURL) { controller in
                controller.assumeLinkMeasured()
                let response = try await controller.perform(FetchRaw(url: server.url(for: .bytes(20_000)), priority: .normal))
                #expect(response.body == Self.filler)
                #expect(server.requestCount(for: .bytes(20_000)) == 1)
                #expect(server.lastRequestHeaders(for: .bytes(20_000))?["range"] == nil)
            }
            try await withController(kind.make(), baseURL: server.baseURL, configure: { $0.conditions.delayablePacing = .bandwidthDelay(roundTrips: 2, rangeBytes: nil) }) { controller in
                controller.assumeLinkMeasured()
                let response = try await controller.perform(FetchRaw(url: server.url(for: .bytes(20_000)), priority: .low))
                #expect(response.body == Self.filler)
                #expect(server.requestCount(for: .bytes(20_000)) == 2)
                #expect(server.lastRequestHeaders(for: .bytes(20_000))?["range"] == nil)
            }
        }
    }

    /// Before the monitor has measured the link, a download's ranges grow:
    /// 8 KB, then twice the one before (of 40,000 bytes: 8 KB, 16 KB, the rest).
    @Test func beforeTheLinkIsMeasuredRangesGrow() async throws {
        try await withServer { server in
            try await withController(TransportKind.asyncHTTPClient.make(), baseURL: server.baseURL) { controller in
                let response = try await controller.perform(FetchRaw(url: server.url(for: .bytes(40_000)), priority: .low))
                #expect(response.body == Data(repeating: UInt8(ascii: "b"), count: 40_000))
                #expect(server.requestCount(for: .bytes(40_000)) == 3)
                #expect(server.lastRequestHeaders(for: .bytes(40_000))?["range"] == "bytes=24576-39999")
            }
        }
    }

    /// A server without ranges answers the first request whole; pieces without
    /// a validator, and an empty body (416), are asked for again without `Range`.
    @Test(arguments: [
        (DemoServer.Fault.bytes(20_000, ranges: .ignored), 20_000, 1),
        (.bytes(20_000, ranges: .untagged), 20_000, 2),
        (.bytes(0), 0, 2),
        (.bytes(5_000), 5_000, 1),
    ])
    func serversThatCannotJoinRangesGetOneWholeAnswer(fault: DemoServer.Fault, bytes: Int, requests: Int) async throws {
        try await withServer { server in
            try await withController(TransportKind.asyncHTTPClient.make(), baseURL: server.baseURL) { controller in
                controller.assumeLinkMeasured()
                let response = try await controller.perform(FetchRaw(url: server.url(for: fault), priority: .low))
                #expect(response.status == 200)
                #expect(response.body == Data(repeating: UInt8(ascii: "b"), count: bytes))
                #expect(server.requestCount(for: fault) == requests)
            }
        }
    }

    @Test func aResourceThatChangesBetweenRangesFailsTheAttempt() async throws {
        try await withServer { server in
            try await withController(TransportKind.asyncHTTPClient.make(), baseURL: server.baseURL, configure: { $0.retries.policy = .never }) { controller in
                controller.assumeLinkMeasured()
                let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: server.url(for: .bytes(20_000, ranges: .changing)), priority: .low)) }
                #expect(error?.code == .connectionLost)
                #expect(error?.description.contains("the resource changed between byte ranges") == true)
                #expect(server.requestCount(for: .bytes(20_000)) == 2)
            }
        }
    }

    /// Urgent work that arrives while a delayable download runs goes first:
    /// the download asks for its next range only once the urgent job ended.
    @Test func urgentWorkOvertakesADownloadBetweenItsRanges() async throws {
        let script = RangeScript()
        try await withController(script.transport, baseURL: URL(string: "http://script.invalid/")!) { controller in
            let (download, urgent) = try await script.pauseADownloadBehindUrgentWork(controller)
            #expect(script.ranges == ["bytes=0-8191"])
            #expect(controller.activity.pausedBetweenRanges == 1)
            script.answerUrgent()
            #expect(try await urgent.value.status == 200)
            let response = try await download.value
            #expect(response.body == Self.filler)
            // The urgent transfer left the monitor without an estimate: the next range is twice the first.
            #expect(script.ranges == ["bytes=0-8191", "bytes=8192-19999"])
            #expect(script.ifRanges == ["\"v\""])
            #expect(controller.activity.pausedBetweenRanges == 0)
        }
    }

    @Test func aCancelledDownloadStopsWaitingForItsNextRange() async throws {
        let script = RangeScript()
        try await withController(script.transport, baseURL: URL(string: "http://script.invalid/")!) { controller in
            let (download, urgent) = try await script.pauseADownloadBehindUrgentWork(controller)
            #expect(controller.activity.pausedBetweenRanges == 1)
            download.cancel()
            let error = await DepotError.from { _ = try await download.value }
            #expect(error?.code == .cancelled)
            #expect(controller.activity.pausedBetweenRanges == 0)
            #expect(script.ranges == ["bytes=0-8191"])
            script.answerUrgent()
            _ = try await urgent.value
        }
    }

    /// An urgent request for the same resource joins a paused download and
    /// promotes it: it is no longer delayable, so it stops waiting for the
    /// other urgent job at once.
    @Test func aPromotedDownloadStopsWaitingForItsNextRange() async throws {
        let script = RangeScript()
        let big = RangeScript.big
        try await withController(script.transport, baseURL: URL(string: "http://script.invalid/")!) { controller in
            let (download, urgent) = try await script.pauseADownloadBehindUrgentWork(controller)
            #expect(controller.activity.pausedBetweenRanges == 1)
            // The same resource, now wanted urgently: the ticket joins the running job.
            controller.enqueue(FetchRaw(url: big, priority: .high))
            let released = controller.activity.pausedBetweenRanges == 0
            #expect(released, "the promoted download still waits for the urgent job")
            if !released { script.answerUrgent() }
            let response = try await download.value
            #expect(response.body == Self.filler)
            #expect(script.ranges == ["bytes=0-8191", "bytes=8192-16383", "bytes=16384-19999"])
            script.answerUrgent()
            _ = try await urgent.value
        }
    }

    /// A budget that grows past what a range may add to its start (a huge
    /// `minimumBytes`, known only once the link was measured) asks for the
    /// rest, and does not overflow.
    @Test func aHugeBudgetDuringADownloadAsksForTheRest() async throws {
        let controllerBox = Mutex<NetworkController?>(nil)
        let transport = ScriptedTransport { request in
            let range = request.headers["Range"] ?? ""
            // A new measurement while the first range arrives: the budget is now the minimum, Int64.max.
            controllerBox.withLock { $0 }?.pacingBudget.store(.max, ordering: .relaxed)
            let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            let start = bounds[0], end = min(bounds[1], 19_999)
            let headers: HeaderFields = ["Content-Range": "bytes \(start)-\(end)/20000", "ETag": "\"v\"", "Content-Length": "\(end - start + 1)"]
            return TransportResponse(status: 206, headers: headers, body: TransportBody(data: Data(repeating: UInt8(ascii: "b"), count: end - start + 1)))
        }
        try await withController(transport, configure: { $0.conditions.delayablePacing = .bandwidthDelay(roundTrips: 2, minimumBytes: .max) }) { controller in
            controllerBox.withLock { $0 = controller }
            controller.assumeLinkMeasured()
            let response = try await controller.perform(FetchRaw(url: RangeScript.big, priority: .low))
            #expect(response.body == Self.filler)
            #expect(transport.requests.map { $0.headers["Range"] } == ["bytes=0-8191", "bytes=8192-19999"])
        }
    }
}

extension NetworkController {
    /// As if the monitor had measured a link with a pacing budget of `bytes`
    /// (the pacing budget and so the range size are unknown until then, and
    /// downloads come whole): ranges of ``DelayablePacing/defaultRangeBytes``.
    func assumeLinkMeasured(budget bytes: Int64 = 0) {
        pacingBudget.store(bytes, ordering: .relaxed)
    }
}

/// A scripted server of one 20,000-byte resource, `/big` (ETag `"v"`), whose
/// first range's body the test finishes, and of `/urgent`, held at the
/// transport's gate until the test answers it.
final class RangeScript: Sendable {
    let transport = ScriptedTransport()
    private let firstBody = ServerBox<AsyncThrowingStream<Data, any Error>.Continuation?>(nil)

    init() {
        transport.respond(to: "/urgent", with: .status(200, body: Data("ok".utf8)).gated)
        transport.respond(to: "/big", with: .respond { [firstBody] request in Self.range(request, firstBody: firstBody) })
    }

    static let big = URL(string: "http://script.invalid/big")!
    static let urgent = URL(string: "http://script.invalid/urgent")!

    /// The `Range` of each request for `/big`, in order.
    var ranges: [String] { transport.requests.filter { $0.url.path == "/big" }.map { $0.headers["Range"] ?? "" } }
    var ifRanges: [String] { transport.requests.compactMap { $0.headers["If-Range"] } }

    /// Starts a delayable download of `/big` on a measured link, then urgent
    /// work, ends the download's first range, and returns once the download
    /// waits for the urgent work, or (wrongly) asks for its next range.
    func pauseADownloadBehindUrgentWork(_ controller: NetworkController) async throws -> (download: Task<NetworkResponse, any Error>, urgent: Task<NetworkResponse, any Error>) {
        controller.assumeLinkMeasured()
        let download = Task { try await controller.perform(FetchRaw(url: Self.big, priority: .low)) }
        #expect(try await transport.requests(atLeast: 1).map { $0.headers["Range"] } == ["bytes=0-8191"])
        let urgent = Task { try await controller.perform(FetchRaw(url: Self.urgent, priority: .high)) }
        #expect(try await transport.waitingAtGate(atLeast: 1).map(\.url) == [Self.urgent])
        finishFirstRange()
        // Whichever fact comes first: the download waits between ranges
        // (right), or asks for its next range (wrong: the callers'
        // expectations on `ranges` then fail).
        let transport = self.transport
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await controller.waitUntilPausedBetweenRanges() }
            group.addTask { _ = try? await transport.requests(atLeast: 3) }
            await group.next()
            group.cancelAll()
        }
        return (download, urgent)
    }

    func finishFirstRange() {
        let body = firstBody.withLock { $0.take() }
        body?.yield(Data(repeating: UInt8(ascii: "b"), count: 8192))
        body?.finish()
    }

    /// Answers the urgent request, and every later one at once.
    func answerUrgent() {
        transport.openGate()
    }

    /// The answer to a request for `/big`: the first range's body waits for
    /// ``finishFirstRange()``; a request without a range gets the whole body.
    private static func range(_ request: TransportRequest, firstBody: ServerBox<AsyncThrowingStream<Data, any Error>.Continuation?>) -> TransportResponse {
        let bounds = (request.headers["Range"] ?? "").dropFirst(6).split(separator: "-").compactMap { Int($0) }
        guard bounds.count == 2 else {
            // Not a range: answered whole, and the test's expectations on `ranges` fail.
            return TransportResponse(status: 200, headers: ["ETag": "\"v\""], body: TransportBody(data: Data(repeating: UInt8(ascii: "b"), count: 20_000)))
        }
        let start = bounds[0], end = min(bounds[1], 19_999)
        let headers: HeaderFields = ["Content-Range": "bytes \(start)-\(end)/20000", "ETag": "\"v\"", "Content-Length": "\(end - start + 1)"]
        if start == 0 {
            let (body, continuation) = TransportBody.makeStream()
            firstBody.withLock { $0 = continuation }
            return TransportResponse(status: 206, headers: headers, body: body)
        }
        return TransportResponse(status: 206, headers: headers, body: TransportBody(data: Data(repeating: UInt8(ascii: "b"), count: end - start + 1)))
    }
}
