import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization

/// `Idempotency-Key` for the demo server's write routes (`POST /posts`,
/// `DELETE /posts/:id` and the CRM's writes), so that a client that lost an answer can send the same
/// request again and the change happens once.
///
/// For a request that carries the header, on one route group:
///
/// | the key | the answer |
/// |---|---|
/// | new | the handler runs; its answer (any status) is remembered |
/// | seen, same method, path and body, answered | the first answer again, with `Idempotent-Replayed: true` |
/// | seen, same request, still being handled | 409 `{"errors": {"idempotency_key": ["a request with this key is still in flight"]}}` |
/// | seen with another method, path or body | 422 `{"errors": {"idempotency_key": ["was used with a different body"]}}` |
///
/// A handler that throws forgets the key: nothing was answered, so the
/// client may try again. Requests without the header are handled as they come.
/// A replay carries the first answer's status, `Content-Type`, body and `ETag`.
///
/// Every request that reaches ``respond(to:deduplicating:_:)`` with a key is
/// counted (replays too) by the `countDelivery` closure, which the server
/// keeps in ``DemoServer/Stats/idempotencyKeys``: that is how a test proves a
/// client sent a change once. A route that passes `deduplicating: false` (a
/// server that does not honour the header) counts too, then always handles.
/// The 409's body names the key, which is what `Mutation.isStillProcessing`
/// looks for to try again later instead of giving up.
///
/// For example:
///
/// ```swift
/// let keys = IdempotencyKeys()
/// router.post("/tasks") { request, _ in
///     try await keys.respond(to: request) { body in try createTask(from: body) }
/// }
/// ```
final class IdempotencyKeys: Sendable {
    /// The request header that carries the key.
    static let header = HTTPField.Name("Idempotency-Key")!
    /// The header set on a replayed answer.
    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!

    /// An answer as remembered for replays.
    struct Answer: Sendable, Equatable {
        var status: Int
        var contentType: String?
        var body: Data
        /// The answer's `ETag`, if it had one (a contact's version).
        var eTag: String? = nil
    }

    /// What a key allows a request to do.
    enum Claim: Sendable, Equatable {
        /// First use: handle the request, then ``record(_:for:)`` or ``release(_:)``.
        case fresh
        /// Answered before: send this answer again.
        case replay(Answer)
        /// The first request with this key is still being handled.
        case inFlight
        /// The key was used for another request.
        case mismatch
    }

    private struct Remembered: Sendable {
        /// Method, path and body of the request that first used the key.
        var fingerprint: String
        /// Its answer; `nil` while it is being handled.
        var answer: Answer?
    }

    private let keys = Mutex<[String: Remembered]>([:])
    private let countDelivery: @Sendable (_ key: String, _ route: String) -> Void

    /// Makes an empty set of keys; `countDelivery` is told of every request with
    /// a key that reaches ``respond(to:deduplicating:_:)``, with its route
    /// (`"PATCH /contacts/3"`, the path without the query).
    init(countDelivery: @escaping @Sendable (_ key: String, _ route: String) -> Void = { _, _ in }) {
        self.countDelivery = countDelivery
    }

    // MARK: - The rules (no I/O)

    /// Claims `key` for a request with `fingerprint`; a fresh key is now in flight.
    func claim(_ key: String, fingerprint: String) -> Claim {
        keys.withLock { keys in
            guard let previous = keys[key] else {
                keys[key] = Remembered(fingerprint: fingerprint, answer: nil)
                return .fresh
            }
            guard previous.fingerprint == fingerprint else { return .mismatch }
            return previous.answer.map(Claim.replay) ?? .inFlight
        }
    }

    /// Remembers the answer to the request that claimed `key`.
    func record(_ answer: Answer, for key: String) {
        keys.withLock { $0[key]?.answer = answer }
    }

    /// Forgets a key whose request was not answered (its handler threw).
    func release(_ key: String) {
        keys.withLock { _ = $0.removeValue(forKey: key) }
    }

    // MARK: - On a route

    /// Collects the request's body and answers it by the rules above; `handle`
    /// gets the body and runs at most once per key, unless `deduplicating` is
    /// `false`: then the key is counted and otherwise ignored, as a server that
    /// does not know the header would.
    func respond(to request: Request, deduplicating: Bool = true, _ handle: (ByteBuffer) async throws -> Response) async throws -> Response {
        let body = try await request.body.collect(upTo: 1 << 20)
        guard let key = request.headers[Self.header] else { return try await handle(body) }
        countDelivery(key, "\(request.method) \(request.uri.path)")
        guard deduplicating else { return try await handle(body) }
        let fingerprint = "\(request.method) \(request.uri.path)\n\(String(buffer: body))"
        switch claim(key, fingerprint: fingerprint) {
        case .fresh:
            break
        case .replay(let answer):
            var response = Self.response(answer)
            response.headers[Self.replayedHeader] = "true"
            return response
        case .inFlight:
            return try SenbeiRoutes.invalidStatus(.conflict, ["idempotency_key": ["a request with this key is still in flight"]])
        case .mismatch:
            return try SenbeiRoutes.invalid(["idempotency_key": ["was used with a different body"]])
        }
        let response: Response
        do {
            response = try await handle(body)
        } catch {
            release(key)
            throw error
        }
        let collector = BodyCollector()
        let status = response.status
        let contentType = response.headers[.contentType]
        let eTag = response.headers[.eTag]
        do {
            try await response.body.write(collector)
        } catch {
            release(key)
            throw error
        }
        let answer = Answer(status: status.code, contentType: contentType, body: Data(buffer: collector.buffer.withLock { $0 }), eTag: eTag)
        record(answer, for: key)
        return Self.response(answer)
    }

    private static func response(_ answer: Answer) -> Response {
        var headers = HTTPFields()
        if let contentType = answer.contentType { headers[.contentType] = contentType }
        if let eTag = answer.eTag { headers[.eTag] = eTag }
        // No body at all for an empty one: a 204 must not carry a length.
        let body: ResponseBody = answer.body.isEmpty ? .init() : .init(byteBuffer: ByteBuffer(bytes: answer.body))
        return Response(status: .init(code: answer.status), headers: headers, body: body)
    }
}
