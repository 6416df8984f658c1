import Foundation
import Hummingbird
import Logging
import NIOCore

/// The loopback server the transport benchmark talks to, run as its own process
/// so its CPU time is not counted as the client's.
enum BenchServer {
    /// A 1 KB JSON document, the same for every item.
    static let item: ByteBuffer = {
        let filler = String(repeating: "x", count: 1024 - 64)
        return ByteBuffer(string: #"{"id":1,"title":"An item of about one kilobyte","body":"\#(filler)"}"#)
    }()

    static func run() async throws {
        let router = Router()
        router.get("/items/:id") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: item))
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
}
