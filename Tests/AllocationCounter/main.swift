// depot-allocations: allocations per operation, for the thresholds that
// `AllocationTests` checks in CI. A count, unlike a time, does not move with
// the machine's load. Each scenario runs a warm-up, then counts the malloc
// calls of every thread (CMallocCounter) over sequential operations.
//
//   depot-allocations [operations]   prints "scenario<TAB>allocations per operation" lines
//   depot-allocations serve          a loopback server for the transport scenarios
import AsyncHTTPClient
import CMallocCounter
import Depot
import DepotAsyncHTTPClient
import DepotStore
import Foundation
import GRDB
import Hummingbird
import Logging
import NIOCore

/// Answers from memory: the controller's own cost, with no network.
struct InstantTransport: Transport {
    let body = Data(repeating: UInt8(ascii: "x"), count: 1024)
    func send(_ request: TransportRequest) async throws -> TransportResponse {
        TransportResponse(status: 201, headers: ["Content-Length": "1024"], body: TransportBody(data: body))
    }
}

struct GetItem: NetworkOperation {
    var id: Int
    var request: NetworkRequest { .get("/items/\(id)") }
    var coalescing: Coalescing { .never }
    func process(_ response: NetworkResponse, context: OperationContext) async throws -> Int { response.body.count }
}

struct PassThrough: ResponseInterceptor {
    func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision { .proceed }
}

/// An outbox send with a row of its own, committed when the server answers.
struct AddNote: Mutation {
    static let typeName = "AddNote"
    var payload: Int
    init(payload: Int) { self.payload = payload }
    var request: NetworkRequest { .post("/m", json: ["n": payload]) }
    func applyOptimistically(_ db: Database) throws {
        try db.execute(sql: "INSERT INTO note (id, sent) VALUES (?, 0)", arguments: [payload])
    }
    func commit(_ response: NetworkResponse, _ db: Database) throws {
        try db.execute(sql: "UPDATE note SET sent = 1 WHERE id = ?", arguments: [payload])
    }
    func rollback(_ error: DepotError, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM note WHERE id = ?", arguments: [payload])
    }
}

/// Runs `body` for a warm-up, then returns the allocations of `operations` runs, per run.
func count(_ operations: Int, _ body: (Int) async throws -> Void) async throws -> Double {
    for index in 0..<min(200, operations) { try await body(-1 - index) }
    depot_malloc_counter_start()
    for index in 0..<operations { try await body(index) }
    return Double(depot_malloc_counter_stop()) / Double(operations)
}

func report(_ scenario: String, _ value: Double) {
    print("\(scenario)\t\(String(format: "%.2f", value))")
}

func serve() async throws {
    let item = ByteBuffer(repeating: UInt8(ascii: "x"), count: 1024)
    let router = Router()
    router.get("/items/:id") { _, _ in Response(status: .ok, body: .init(byteBuffer: item)) }
    var logger = Logger(label: "depot-allocations")
    logger.logLevel = .warning
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), onServerRunning: { channel in
        FileHandle.standardOutput.write(Data("port \(channel.localAddress?.port ?? 0)\n".utf8))
    }, logger: logger)
    try await app.runService()
}

/// Starts `depot-allocations serve` and returns it with the port it listens on.
func startServer() throws -> (Process, Int) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
    process.arguments = ["serve"]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    var line = Data()
    while !line.contains(UInt8(ascii: "\n")) {
        let byte = output.fileHandleForReading.readData(ofLength: 1)
        guard !byte.isEmpty else { throw CocoaError(.fileReadUnknown) }
        line.append(byte)
    }
    let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard text.hasPrefix("port "), let port = Int(text.dropFirst(5)), port > 0 else { throw CocoaError(.fileReadCorruptFile) }
    return (process, port)
}

func measure(operations: Int) async throws {
    let memory = URL(string: "http://127.0.0.1:1")!
    for notifications in [true, false] {
        let controller = NetworkController(configuration: .init(
            baseURL: memory,
            transport: InstantTransport(),
            limits: .init(concurrency: .fixed(1)),
            observability: .init(notificationCenter: notifications ? NotificationCenter() : nil)
))
        report(notifications ? "controller" : "controller, no notifications", try await count(operations) { index in
            _ = try await controller.perform(GetItem(id: index))
        })
        _ = await controller.shutdown(grace: .zero)
    }
    let authenticator = TokenAuthenticator(for: memory, refresher: TokenRefresher { credential, _ in credential })
    await authenticator.signIn(TokenCredential(accessToken: "token", refreshToken: "refresh"))
    let variants: [(String, (inout NetworkController.Configuration) -> Void)] = [
        ("controller + interceptor", { $0.interceptors = [PassThrough()] }),
        ("controller + token", { $0.authenticator = authenticator }),
    ]
    for (scenario, configure) in variants {
        var configuration = NetworkController.Configuration(baseURL: memory, transport: InstantTransport(), limits: .init(concurrency: .fixed(1)), observability: .init(notificationCenter: nil))
        configure(&configuration)
        let controller = NetworkController(configuration: configuration)
        report(scenario, try await count(operations) { index in _ = try await controller.perform(GetItem(id: index)) })
        _ = await controller.shutdown(grace: .zero)
    }

    // An outbox send, from the durable insert to the commit of the answer.
    let folder = FileManager.default.temporaryDirectory.appending(path: "depot-allocations-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    var migrator = DatabaseMigrator()
    migrator.registerMigration("notes") { db in
        try db.create(table: "note") { t in
            t.primaryKey("id", .integer)
            t.column("sent", .boolean).notNull()
        }
    }
    let store = try Store(path: folder.appending(path: "cache.sqlite").path, migrator: migrator)
    let controller = NetworkController(configuration: .init(baseURL: memory, transport: InstantTransport(), observability: .init(notificationCenter: nil)), store: store)
    let outbox = Outbox(store: store, controller: controller, types: [AddNote.self])
    report("outbox send", try await count(operations / 4) { index in
        let ticket = try await outbox.send(AddNote(payload: index + 1_000_000))
        _ = try await ticket.outcome().get()
    })
    _ = await controller.shutdown(grace: .zero)
    try await store.close()

    // Over loopback: the transport alone and with the controller, against
    // AsyncHTTPClient itself.
    let (server, port) = try startServer()
    defer { server.terminate() }
    let base = URL(string: "http://127.0.0.1:\(port)")!
    let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: AsyncHTTPClientTransport.defaultConfiguration)
    let raw = try await count(operations) { index in
        let response = try await client.execute(HTTPClientRequest(url: base.absoluteString + "/items/\(index)"), deadline: .distantFuture)
        _ = try await response.body.collect(upTo: 1 << 20)
    }
    try await client.shutdown()
    report("AsyncHTTPClient", raw)
    let loopback = NetworkController(configuration: .init(baseURL: base, transport: AsyncHTTPClientTransport(), limits: .init(concurrency: .fixed(1)), observability: .init(notificationCenter: nil)))
    let depot = try await count(operations) { index in _ = try await loopback.perform(GetItem(id: index)) }
    report("Depot + AsyncHTTPClientTransport over AsyncHTTPClient", depot - raw)
    _ = await loopback.shutdown(grace: .seconds(1))
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.first == "serve" {
    try await serve()
} else {
    guard let operations = Int(arguments.first ?? "2000"), operations >= 4 else {
        FileHandle.standardError.write(Data("usage: depot-allocations [operations (at least 4)] | serve\n".utf8))
        exit(64)
    }
    try await measure(operations: operations)
}
