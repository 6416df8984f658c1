import Depot
import Foundation
import Hummingbird
import HummingbirdTLS
import Logging
import NIOSSL
import ServiceLifecycle

/// An HTTPS listener on 127.0.0.1, port 0, that answers `GET /hello`.
enum TLSListener {
    /// The body of `GET /hello`.
    static let greeting = "hello over TLS"

    struct CouldNotBind: Error {}

    /// Runs `body` with a listener that presents `tls`'s certificate, and stops
    /// the listener afterwards. `body` gets the listener's base URL
    /// (`https://127.0.0.1:PORT`).
    static func withRunning<T>(
        _ tls: TLSConfiguration,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (URL) async throws -> T
    ) async throws -> T {
        let router = Router()
        router.get("hello") { _, _ in greeting }
        let quiet = Logger(label: "depot-tls-listener") { _ in SwiftLogNoOpLogHandler() }
        let (ports, portSignal) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router,
            server: try .tls(.http1(), tlsConfiguration: tls),
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "depot-tls-listener"),
            onServerRunning: { channel in portSignal.yield(channel.localAddress?.port ?? 0) },
            logger: quiet
        )
        let group = ServiceGroup(services: [app], gracefulShutdownSignals: [], cancellationSignals: [], logger: quiet)
        let task = Task { try await group.run() }
        // If the listener cannot bind, the group ends: stop waiting for its port then.
        Task { _ = await task.result; portSignal.finish() }
        var port = 0
        for await bound in ports {
            port = bound
            break
        }
        guard port > 0, let url = URL(string: "https://127.0.0.1:\(port)") else {
            task.cancel()
            _ = await task.result
            throw CouldNotBind()
        }
        do {
            let result = try await body(url)
            await group.triggerGracefulShutdown()
            _ = await task.result
            return result
        } catch {
            await group.triggerGracefulShutdown()
            _ = await task.result
            throw error
        }
    }
}

/// `GET /hello` as text.
struct FetchGreeting: NetworkOperation {
    typealias Output = String
    var request: NetworkRequest { .get("/hello") }

    func process(_ response: NetworkResponse, context: OperationContext) async throws -> String {
        response.text
    }
}

/// Fetches ``TLSListener/greeting`` from `baseURL` through `transport`, with a
/// controller of its own that it shuts down (with the transport) afterwards.
func fetchGreeting(from baseURL: URL, through transport: any Transport) async throws(DepotError) -> String {
    let controller = NetworkController(configuration: .init(baseURL: baseURL, transport: transport, observability: .init(notificationCenter: nil)))
    do throws(DepotError) {
        let text = try await controller.perform(FetchGreeting())
        _ = await controller.shutdown(grace: .zero)
        return text
    } catch {
        _ = await controller.shutdown(grace: .zero)
        throw error
    }
}

/// The `DepotError` that `body` throws, or `nil` when it succeeds.
func depotError(_ body: () async throws -> Void) async -> DepotError? {
    do {
        try await body()
        return nil
    } catch let error as DepotError {
        return error
    } catch {
        return DepotError(.processing, detail: "not a DepotError: \(error)")
    }
}
