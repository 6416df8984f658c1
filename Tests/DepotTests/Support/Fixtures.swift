import AsyncHTTPClient
import DemoServer
@testable import Depot
import DepotAsyncHTTPClient
import Foundation
import Synchronization

/// The network transports every behaviour test runs against.
enum TransportKind: String, CaseIterable, CustomStringConvertible, Sendable {
    case urlSession
    case asyncHTTPClient

    func make() -> any Transport {
        switch self {
        case .urlSession: return URLSessionTransport()
        case .asyncHTTPClient: return AsyncHTTPClientTransport()
        }
    }

    var description: String { rawValue }
}

/// Runs `body` with a fresh ``DemoServer`` on 127.0.0.1, port 0, and stops the
/// server afterwards. Tests reach it through its typed ``DemoServer/Fault`` routes.
func withServer<T>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: (DemoServer) async throws -> T
) async throws -> T {
    try await DemoServer.withRunning(.init(host: "127.0.0.1", port: 0), isolation: isolation, body)
}

/// Runs `body` with a controller on `transport` and shuts it down afterwards.
func withController<T>(
    isolation: isolated (any Actor)? = #isolation,
    _ transport: any Transport,
    baseURL: URL? = nil,
    configure: (inout NetworkController.Configuration) -> Void = { _ in },
    _ body: (NetworkController) async throws -> T
) async throws -> T {
    var configuration = NetworkController.Configuration(baseURL: baseURL, transport: transport, observability: .init(notificationCenter: nil))
    configure(&configuration)
    let controller = NetworkController(configuration: configuration)
    do {
        let result = try await body(controller)
        _ = await controller.shutdown(grace: .zero)
        return result
    } catch {
        _ = await controller.shutdown(grace: .zero)
        throw error
    }
}

struct Hello: Codable, Sendable, Equatable {
    var message: String
}

/// GET a path and decode `{"message": ...}`: ``DemoServer/Fault/hello`` by default.
struct FetchHello: NetworkOperation {
    typealias Output = Hello
    var path = DemoServer.Fault.hello.path
    var priority: Priority = .normal
    var category: OperationCategory = .default
    var timeout: Timeout = .default
    var exitPolicy: ExitPolicy = .cancel
    var request: NetworkRequest { .get(path) }
}

extension FetchHello {
    /// GET `fault`; a `variant` is added as a query, so that otherwise equal
    /// requests have different URLs (and are not coalesced).
    init(_ fault: DemoServer.Fault, variant: String? = nil, priority: Priority = .normal, category: OperationCategory = .default, exitPolicy: ExitPolicy = .cancel) {
        self.init(path: fault.path(variant: variant), priority: priority, category: category, exitPolicy: exitPolicy)
    }
}

/// GET any URL and hand back the raw response.
struct FetchRaw: NetworkOperation {
    typealias Output = NetworkResponse
    var url: URL
    var timeout: Timeout = .default
    var priority: Priority = .normal
    var category: OperationCategory = .default
    var offlineBehavior: OfflineBehavior = .waitForConnectivity
    var request: NetworkRequest { .get(url) }
}

/// POST JSON to a path and decode the echo: ``DemoServer/Fault/echoBody`` by default.
struct PostEcho: NetworkOperation {
    typealias Output = [String: String]
    var path = DemoServer.Fault.echoBody.path
    var text: String
    var exitPolicy: ExitPolicy = .cancel
    var priority: Priority { .veryHigh }
    var request: NetworkRequest { .post(path, json: ["text": text]) }
}

extension PostEcho {
    /// POST `{"text": text}` to `fault` (one that echoes the body).
    init(_ fault: DemoServer.Fault, text: String, exitPolicy: ExitPolicy = .cancel) {
        self.init(path: fault.path, text: text, exitPolicy: exitPolicy)
    }
}

extension DemoServer.Fault {
    /// ``path`` with `variant` added to its query, or ``path`` itself when `nil`.
    func path(variant: String?) -> String {
        guard let variant else { return path }
        return path + (path.contains("?") ? "&" : "?") + variant
    }
}

extension DepotError {
    /// The error a test expected, or a failure description.
    static func from(_ body: () async throws -> Void) async -> DepotError? {
        do {
            try await body()
            return nil
        } catch let error as DepotError {
            return error
        } catch {
            return DepotError(.transport, detail: "not a DepotError: \(error)")
        }
    }
}

/// Body chunks a test hands out one at a time; `nil` ends the body.
actor ChunkFeed {
    private var queued: [Data?] = []
    private var waiting: CheckedContinuation<Data?, Never>?

    func next() async -> Data? {
        if !queued.isEmpty { return queued.removeFirst() }
        return await withCheckedContinuation { waiting = $0 }
    }

    func send(_ chunk: Data?) {
        if let waiting {
            self.waiting = nil
            waiting.resume(returning: chunk)
        } else {
            queued.append(chunk)
        }
    }
}

/// A `Mutex` in a class, for state shared with `@Sendable` closures in tests.
final class ServerBox<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R { try mutex.withLock { try body(&$0) } }
    var value: Value { mutex.withLock { $0 } }
}
