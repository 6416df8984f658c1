@testable import DemoServer
import Depot
import DepotAsyncHTTPClient
import Foundation
import Testing

/// depot-server's CRM writes honour `Idempotency-Key` as `POST /posts` does
/// (one shared ``IdempotencyKeys``): the same request again is the first
/// answer, replayed; the key with another request is a 422; a request still
/// being handled makes a repeat a 409 that names the key.
@Suite(.timeLimit(.minutes(1)))
struct ServerIdempotencyTests {
    /// One raw request, any answer accepted.
    struct Send: NetworkOperation {
        typealias Output = NetworkResponse
        var request: NetworkRequest
        var coalescing: Coalescing { .never }
        var retryPolicy: RetryPolicy? { .never }
        func validate(_ response: NetworkResponse) throws {}
    }

    static let credentials = "Basic " + Data("admin:secret".utf8).base64EncodedString()

    /// Sends `method path` with `json`, the CRM's credentials and, if given, `key`.
    static func send(_ controller: NetworkController, _ method: NetworkRequest.Method, _ path: String, json: String? = nil, key: String? = nil, credentials: String = credentials) async throws -> NetworkResponse {
        var headers: HeaderFields = ["Authorization": credentials]
        if let key { headers["Idempotency-Key"] = key }
        let request = NetworkRequest(method: method, target: .path(String(path.dropFirst())), headers: headers, body: json.map { .data(Data($0.utf8), contentType: "application/json") })
        return try await controller.perform(Send(request: request))
    }

    static func withServer(_ body: (NetworkController) async throws -> Void) async throws {
        try await DemoServer.withRunning(.init(port: 0, seed: 7)) { server in
            let controller = NetworkController(configuration: .init(baseURL: server.baseURL, transport: AsyncHTTPClientTransport(), observability: .init(notificationCenter: nil)))
            do {
                try await body(controller)
            } catch {
                _ = await controller.shutdown(grace: .zero)
                throw error
            }
            _ = await controller.shutdown(grace: .zero)
        }
    }

    /// How many activities the server lists with `subject`.
    static func activities(_ controller: NetworkController, _ subject: String) async throws -> Int {
        let body = try await send(controller, .get, "/activities").text
        return body.components(separatedBy: "\"subject\":\"\(subject)\"").count - 1
    }

    /// Sends the request twice with one key: the second answer is the first, replayed.
    static func expectReplay(_ controller: NetworkController, _ method: NetworkRequest.Method, _ path: String, json: String? = nil, key: String, status: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let first = try await send(controller, method, path, json: json, key: key)
        let again = try await send(controller, method, path, json: json, key: key)
        #expect(first.status == status, "\(first.text)", sourceLocation: sourceLocation)
        #expect(again.status == first.status && again.body == first.body, "\(again.text)", sourceLocation: sourceLocation)
        #expect(first.headers["Idempotent-Replayed"] == nil && again.headers["Idempotent-Replayed"] == "true", sourceLocation: sourceLocation)
    }

    @Test func eachCRMWriteIsDoneOncePerKey() async throws {
        try await Self.withServer { controller in
            try await Self.expectReplay(controller, .post, "/tasks", json: #"{"name": "Call Ann"}"#, key: "task-1", status: 201)
            #expect(try await Self.activities(controller, "task Call Ann") == 1)

            try await Self.expectReplay(controller, .post, "/contacts", json: #"{"name": "Zoe Quinn"}"#, key: "contact-1", status: 201)
            #expect(try await Self.activities(controller, "contact Zoe Quinn") == 1)

            try await Self.expectReplay(controller, .post, "/comments", json: #"{"commentable_type": "contact", "commentable_id": 3, "comment": "Hi"}"#, key: "comment-1", status: 201)
            let comments = try JSONSerialization.jsonObject(with: try await Self.send(controller, .get, "/comments?contact_id=3").body) as? [[String: Any]]
            #expect(comments?.count == 1)
            let id = try #require(comments?.first?["id"] as? Int)

            let tasks = try JSONSerialization.jsonObject(with: try await Self.send(controller, .get, "/tasks").body) as? [[String: Any]]
            let name = try #require(tasks?.first { $0["id"] as? Int == 3 }?["name"] as? String)
            try await Self.expectReplay(controller, .put, "/tasks/3/complete", key: "done-3", status: 200)
            #expect(try await Self.activities(controller, "task \(name)") == 1, "completed once")

            // Deleting twice without a key finds nothing the second time; with one, the repeat is the first answer.
            try await Self.expectReplay(controller, .delete, "/comments/\(id)", key: "uncomment-1", status: 204)
            #expect(try await Self.send(controller, .delete, "/comments/\(id)").status == 404)

            // A refusal is an answer too: replayed, not handled again.
            try await Self.expectReplay(controller, .post, "/tasks", json: #"{"name": " "}"#, key: "task-blank", status: 422)
        }
    }

    @Test func aKeyUsedForAnotherRequestIsRefused() async throws {
        try await Self.withServer { controller in
            #expect(try await Self.send(controller, .post, "/tasks", json: #"{"name": "Call Ann"}"#, key: "k").status == 201)
            for (method, path, json) in [
                (NetworkRequest.Method.post, "/tasks", #"{"name": "Call Bob"}"#),
                (.post, "/contacts", #"{"name": "Call Ann"}"#),
                (.put, "/tasks/1/complete", nil),
            ] {
                let other = try await Self.send(controller, method, path, json: json, key: "k")
                #expect(other.status == 422, "\(method) \(path)")
                #expect(other.text == #"{"errors":{"idempotency_key":["was used with a different body"]}}"#)
            }
            #expect(try await Self.activities(controller, "task Call Bob") == 0)
            #expect(try await Self.activities(controller, "contact Call Ann") == 0)
        }
    }

    /// A request refused at the door (401) claims no key: with the right
    /// credentials, the same key is handled as new.
    @Test func aRefusedSignInClaimsNoKey() async throws {
        try await Self.withServer { controller in
            let refused = try await Self.send(controller, .post, "/tasks", json: #"{"name": "Call Ann"}"#, key: "k", credentials: "Basic bm9ib2R5Om5vcGU=")
            #expect(refused.status == 401)
            let accepted = try await Self.send(controller, .post, "/tasks", json: #"{"name": "Call Ann"}"#, key: "k")
            #expect(accepted.status == 201 && accepted.headers["Idempotent-Replayed"] == nil)
        }
    }

    /// The rules on their own: a repeat while the first is handled is told to
    /// wait (409, whose body names the key, so the outbox tries again later);
    /// a handler that failed frees the key.
    @Test func aRepeatWhileTheFirstIsHandledWaits() {
        let keys = IdempotencyKeys()
        #expect(keys.claim("k", fingerprint: "POST /tasks\n{}") == .fresh)
        #expect(keys.claim("k", fingerprint: "POST /tasks\n{}") == .inFlight)
        #expect(keys.claim("k", fingerprint: "POST /tasks\n{\"name\": 1}") == .mismatch)
        let answer = IdempotencyKeys.Answer(status: 201, contentType: "application/json", body: Data("{}".utf8))
        keys.record(answer, for: "k")
        #expect(keys.claim("k", fingerprint: "POST /tasks\n{}") == .replay(answer))

        #expect(keys.claim("failed", fingerprint: "DELETE /comments/1\n") == .fresh)
        keys.release("failed")
        #expect(keys.claim("failed", fingerprint: "DELETE /comments/1\n") == .fresh)
    }
}
