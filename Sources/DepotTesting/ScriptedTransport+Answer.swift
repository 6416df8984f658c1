import Depot
import Foundation

extension ScriptedTransport {
    /// What the transport does with one request.
    public struct Answer: Sendable {
        enum Kind: Sendable {
            case response(status: Int, headers: HeaderFields, body: Data)
            case failure(DepotError)
            case respond(@Sendable (TransportRequest) async throws -> TransportResponse)
            case forward(any Transport)
        }

        var kind: Kind
        var isGated = false

        /// A response with `status`, `headers` and `body`; `Content-Length` is set to the body's size.
        ///
        /// For example: `.status(201, body: Data(#"{"id": 42}"#.utf8))`.
        public static func status(_ status: Int, headers: HeaderFields = [:], body: Data = Data()) -> Answer {
            Answer(kind: .response(status: status, headers: headers, body: body))
        }

        /// `send` throws `error`, as a transport does with a failure it met.
        ///
        /// For example: `.failure(DepotError(.connectionLost))`.
        public static func failure(_ error: DepotError) -> Answer {
            Answer(kind: .failure(error))
        }

        /// `send` fails the way a refused connection does, with ``/Depot/DepotError/Code/offline``.
        ///
        /// For example: `transport.respond(to: "/feed", with: .offline, .status(200))`.
        public static var offline: Answer {
            .failure(DepotError(.offline, detail: "ScriptedTransport answered offline"))
        }

        /// Whatever `respond` returns for the request, or throws: for bodies
        /// that stream and answers that depend on the request.
        ///
        /// For example:
        ///
        /// ```swift
        /// .respond { request in
        ///     TransportResponse(status: 302, headers: ["Location": request.url.path + "/"], body: .empty)
        /// }
        /// ```
        public static func respond(_ respond: @escaping @Sendable (TransportRequest) async throws -> TransportResponse) -> Answer {
            Answer(kind: .respond(respond))
        }

        /// This answer, once the request has waited at the transport's gate
        /// until the test let it through (``ScriptedTransport/letThrough(_:)``,
        /// ``ScriptedTransport/openGate()``). A request cancelled at the gate
        /// fails with ``/Depot/DepotError/Code/cancelled``.
        ///
        /// For example: `.status(200).gated`.
        public var gated: Answer {
            var answer = self
            answer.isGated = true
            return answer
        }

        func response(to request: TransportRequest) async throws -> TransportResponse {
            switch kind {
            case .response(let status, var headers, let body):
                headers["Content-Length"] = "\(body.count)"
                return TransportResponse(status: status, headers: headers, body: TransportBody(data: body))
            case .failure(let error):
                throw error
            case .respond(let respond):
                return try await respond(request)
            case .forward(let transport):
                return try await transport.send(request)
            }
        }
    }
}
