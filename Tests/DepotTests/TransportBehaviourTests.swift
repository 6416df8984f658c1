import DemoServer
@testable import Depot
import Foundation
import Testing

/// The same behaviour, over real HTTP on 127.0.0.1, for every network transport.
@Suite(.timeLimit(.minutes(1))) struct TransportBehaviourTests {
    @Test(arguments: TransportKind.allCases)
    func getsAndDecodesJSON(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make(), baseURL: server.baseURL) { controller in
                let hello = try await controller.perform(FetchHello())
                #expect(hello == Hello(message: "hello"))
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func postsJSONAndFormBodies(kind: TransportKind) async throws {
        struct PostForm: NetworkOperation {
            typealias Output = [String: String]
            var request: NetworkRequest { .post(DemoServer.Fault.echoBody.path, form: ["name": "Ann Smith", "note": "a&b=c"]) }
        }
        try await withServer { server in
            try await withController(kind.make(), baseURL: server.baseURL) { controller in
                let json = try await controller.perform(PostEcho(text: "hi"))
                #expect(json["method"] == "POST")
                #expect(json["contentType"] == "application/json")
                #expect(json["body"] == #"{"text":"hi"}"#)
                let form = try await controller.perform(PostForm())
                #expect(form["contentType"] == "application/x-www-form-urlencoded")
                #expect(form["body"] == "name=Ann+Smith&note=a%26b%3Dc")
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func mapsStatusesToErrors(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make(), baseURL: server.baseURL) { controller in
                let expectations: [(Int, DepotError.Code)] = [
                    (401, .unauthorized), (403, .unauthorized), (404, .notFound),
                    (500, .server), (503, .server), (418, .unexpectedStatus), (304, .unexpectedStatus),
                ]
                for (status, code) in expectations {
                    let error = await DepotError.from { _ = try await controller.perform(FetchHello(.status(status, body: "maintenance"))) }
                    #expect(error?.code == code, "status \(status)")
                    #expect(error?.status == status)
                }
                let error = await DepotError.from { _ = try await controller.perform(FetchHello(.status(503, body: "maintenance"))) }
                #expect(error?.description == #"FetchHello failed: server answered 503 Service Unavailable (body: "maintenance")"#)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func malformedJSONIsADecodingError(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make(), baseURL: server.baseURL) { controller in
                // .echoHeaders answers JSON that is not a Hello.
                let error = await DepotError.from { _ = try await controller.perform(FetchHello(.echoHeaders)) }
                #expect(error?.code == .decoding)
                #expect(error?.status == 200)
                #expect(error?.bodyExcerpt?.isEmpty == false)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func connectionRefusedIsOffline(kind: TransportKind) async throws {
        // Start a server to learn a free port, then stop it: nothing listens there now.
        let server = try await DemoServer.start(.init(host: "127.0.0.1", port: 0))
        let url = server.url(for: .hello)
        await server.stop()
        try await withController(kind.make()) { controller in
            let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: url, offlineBehavior: .failFast)) }
            #expect(error?.code == .offline, "\(String(describing: error))")
            #expect(controller.quality == .offline)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func hungServerTimesOut(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make()) { controller in
                let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: server.url(for: .hang), timeout: .idle(.milliseconds(300)))) }
                #expect(error?.code == .timedOut)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func followsRedirects(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make()) { controller in
                let response = try await controller.perform(FetchRaw(url: server.url(for: .redirects(3))))
                #expect(response.status == 200)
                #expect(response.url.path == DemoServer.Fault.hello.path)
                #expect(server.requestCount(for: .redirects(1)) == 1)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func redirectLoopStopsAtTheCap(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make()) { controller in
                let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: server.url(for: .redirectLoop))) }
                #expect(error?.code == .tooManyRedirects)
                #expect(server.requestCount(for: .redirectLoop) == 11)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func crossOriginRedirectDropsAuthorizationAndCookie(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make(), baseURL: server.baseURL, configure: {
                $0.adapters = [
                    Credentials.bearer("s3cret", for: server.baseURL),
                    DefaultHeaders(["Cookie": "session=abc", "X-Trace": "1"]),
                ]
            }) { controller in
                // Same origin first: the credentials arrive.
                _ = try await controller.perform(FetchRaw(url: server.url(for: .echoHeaders)))
                #expect(server.lastRequestHeaders(for: .echoHeaders)?["authorization"] == "Bearer s3cret")
                #expect(server.lastRequestHeaders(for: .echoHeaders)?["cookie"] == "session=abc")

                // Then a 302 to the server's second listener, on another port: they must not.
                #expect(server.crossOriginHeaders == nil)
                let response = try await controller.perform(FetchRaw(url: server.url(for: .redirectCrossOrigin)))
                #expect(response.status == 200)
                #expect(response.url.port != server.port)
                let seen = try #require(server.crossOriginHeaders)
                #expect(seen["authorization"] == nil)
                #expect(seen["cookie"] == nil)
                #expect(seen["x-trace"] == "1")
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func credentialsGoOnlyToTheirOrigin(kind: TransportKind) async throws {
        try await withServer { first in
            try await withServer { second in
                try await withController(kind.make(), configure: {
                    $0.adapters = [Credentials.basic(username: "ann", password: "pw", for: first.baseURL)]
                }) { controller in
                    _ = try await controller.perform(FetchRaw(url: first.url(for: .echoHeaders)))
                    _ = try await controller.perform(FetchRaw(url: second.url(for: .echoHeaders)))
                    #expect(first.lastRequestHeaders(for: .echoHeaders)?["authorization"] == "Basic YW5uOnB3")
                    let seen = try #require(second.lastRequestHeaders(for: .echoHeaders))
                    #expect(seen["authorization"] == nil)
                }
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func endlessBodyFailsAtTheLimitAndTheServerSeesTheAbort(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make(), configure: { $0.limits.maximumBodySize = 1 << 20 }) { controller in
                let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: server.url(for: .huge))) }
                #expect(error?.code == .tooLarge)
                await server.waitUntilAbandoned(.huge)
                #expect(server.abandonedResponses.first == DemoServer.Fault.huge.path)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func cancellingMidBodyCancelsTheTransfer(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make()) { controller in
                let events = controller.events()
                let ticket = controller.enqueue(FetchRaw(url: server.url(for: .huge)))
                // Wait until body bytes are arriving, then cancel.
                for await event in events {
                    if event.ticket == ticket.id, case .progress = event.detail { break }
                }
                ticket.cancel()
                await server.waitUntilAbandoned(.huge)
                #expect(server.abandonedResponses.first == DemoServer.Fault.huge.path)
                #expect(ticket.progress.received > 0)
                await controller.waitUntilIdle()
                #expect(ticket.isFinished)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func reportsProgressWithExpectedLength(kind: TransportKind) async throws {
        try await withServer { server in
            try await withController(kind.make()) { controller in
                let events = controller.events()
                let response = try await controller.perform(FetchRaw(url: server.url(for: .bytes(300_000))))
                #expect(response.body.count == 300_000)
                var last: TransferProgress?
                var finished: NetworkEvent.Finished?
                for await event in events {
                    if case .progress(let progress) = event.detail { last = progress }
                    if case .finished(let info) = event.detail { finished = info; break }
                }
                #expect(last == TransferProgress(received: 300_000, expected: 300_000))
                #expect(finished?.bytes == 300_000)
                #expect(finished?.status == 200)
            }
        }
    }
}
