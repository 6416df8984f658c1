// depot-outbox-sender: one of several processes that share one store's
// outbox, for `OutboxClaimsTests`. Two commands:
//
//   depot-outbox-sender enqueue <store> <count> <lanes>
//       queues <count> tasks ("task-0", …) in <lanes> lanes, sending nothing.
//   depot-outbox-sender drain <store> <server URL> <claim milliseconds>
//       sends what is queued to depot-server's `POST /tasks?idempotency=ignored`
//       (a server that ignores Idempotency-Key) until the outbox is empty.
//
// While draining it writes, unbuffered, `sending <name>` before a task's
// request is made (so a line is out before any byte of it leaves),
// `settled <id>` after an entry is committed and `retry <id>` after an
// attempt without an answer.
import Depot
import DepotAsyncHTTPClient
import DepotStore
import Foundation
import GRDB

/// A CRM task; the server ignores its key, so a second send makes a second task.
struct CreateTask: Mutation {
    struct Payload: Codable, Sendable {
        var name: String
        var lane: String
    }

    static let typeName = "OutboxSender.CreateTask"
    var payload: Payload
    init(payload: Payload) { self.payload = payload }

    var lane: String { payload.lane }
    var request: NetworkRequest {
        say("sending \(payload.name)")
        let credentials = "Basic " + Data("admin:secret".utf8).base64EncodedString()
        return NetworkRequest(
            method: .post, target: .path("tasks"), query: [URLQueryItem(name: "idempotency", value: "ignored")],
            headers: ["Authorization": credentials], body: .json(["name": payload.name]))
    }

    func applyOptimistically(_ db: Database) throws {}
    func commit(_ response: NetworkResponse, _ db: Database) throws {}
    func rollback(_ error: DepotError, _ db: Database) throws {}
}

/// One line on standard output, written at once (no buffer to lose at a kill).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("depot-outbox-sender: \(message)\n".utf8))
    exit(64)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 4 else { fail("usage: enqueue <store> <count> <lanes> | drain <store> <url> <claim ms>") }
let path = arguments[1]
let store = try Store(path: path)

switch arguments[0] {
case "enqueue":
    guard let count = Int(arguments[2]), let lanes = Int(arguments[3]), lanes > 0 else { fail("bad count or lanes") }
    var configuration = NetworkController.Configuration(baseURL: URL(string: "http://127.0.0.1:9")!, observability: .init(notificationCenter: nil))
    configuration.store = store
    let controller = NetworkController(configuration: configuration)
    _ = await controller.shutdown(grace: .zero)  // nothing goes out from here
    let outbox = Outbox(store: store, controller: controller, types: [CreateTask.self])
    for index in 0..<count {
        try await outbox.send(CreateTask(payload: .init(name: "task-\(index)", lane: "lane-\(index % lanes)")))
    }
    await outbox.waitUntilIdle()
case "drain":
    guard let url = URL(string: arguments[2]), let claim = Int(arguments[3]) else { fail("bad URL or claim") }
    var configuration = NetworkController.Configuration(baseURL: url, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil))
    configuration.store = store
    let controller = NetworkController(configuration: configuration)
    let outbox = Outbox(store: store, controller: controller, types: [CreateTask.self], claimDuration: .milliseconds(claim))
    let changes = outbox.changes()
    let reporter = Task {
        for await change in changes {
            guard let entry = change.entry else { continue }
            if change.step == .committed { say("settled \(entry)") }
            if change.step == .willRetry { say("retry \(entry)") }
        }
    }
    try await outbox.start()
    await outbox.waitUntilIdle()
    _ = await controller.shutdown(grace: .zero)  // ends `changes`
    await reporter.value
default:
    fail("unknown command \(arguments[0])")
}
try await store.close()
