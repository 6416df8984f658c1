import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The loopback server the transport and outbox benchmarks talk to, run as its
/// own process so its CPU time is not counted as the client's.
enum BenchServer {
    /// A 1 KB JSON document, the same for every item.
    static let item: ByteBuffer = {
        let filler = String(repeating: "x", count: 1024 - 64)
        return ByteBuffer(string: #"{"id":1,"title":"An item of about one kilobyte","body":"\#(filler)"}"#)
    }()

    /// Serves until killed; with `staticFile`, also that file's bytes at `GET /feed.xml`.
    static func run(staticFile: String? = nil) async throws {
        let router = Router()
        if let staticFile {
            let bytes = ByteBuffer(bytes: try Data(contentsOf: URL(fileURLWithPath: staticFile)))
            router.get("/feed.xml") { _, _ in
                Response(status: .ok, headers: [.contentType: "application/rss+xml"], body: .init(byteBuffer: bytes))
            }
        }
        router.get("/items/:id") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: item))
        }
        // The outbox benchmark's mutations: `POST /m` honours Idempotency-Key
        // (key → the first answer, replayed as is), and answers 201 with an id.
        let mutations = Mutex(Mutations())
        router.post("/m") { request, _ in
            _ = try await request.body.collect(upTo: 1 << 20)
            let key = request.headers[.init("Idempotency-Key")!]
            let body = mutations.withLock { state -> ByteBuffer in
                state.posts += 1
                if let key, let first = state.answers[key] { return first }
                state.nextID += 1
                let answer = ByteBuffer(string: #"{"id":\#(state.nextID)}"#)
                if let key { state.answers[key] = answer }
                return answer
            }
            return Response(status: .created, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        }
        // Requests to `/m` and distinct keys so far: a replay shows as posts > keys.
        router.get("/m/stats") { _, _ in
            let (posts, keys) = mutations.withLock { ($0.posts, $0.answers.count) }
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"posts":\#(posts),"keys":\#(keys)}"#)))
        }
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                FileHandle.standardOutput.write(Data("PORT \(channel.localAddress?.port ?? 0)\n".utf8))
            },
            logger: Logger(label: "bench-server") { _ in SwiftLogNoOpLogHandler() }
        )
        try await app.runService()
    }

    struct Mutations {
        var answers: [String: ByteBuffer] = [:]
        var nextID = 0
        var posts = 0
    }
}
