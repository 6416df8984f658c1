import Foundation
import Hummingbird
import NIOCore

extension FaultRoutes {
    /// The answers a test scripts: hello, echoes, and requests held at a gate.
    static func addScripted(to router: Router<DemoRequestContext>, state: ServerState) {
        router.get("/faults/hello") { _, _ in hello() }
        router.get("/faults/echo/headers") { request, _ in try json(headers(of: request)) }
        router.post("/faults/echo/body") { request, _ in try await echoBody(request) }
        router.put("/faults/echo/body") { request, _ in try await echoBody(request) }
        router.get("/faults/gated/:gate") { _, context in
            try await state.gates.wait(try gate(context))
            return hello()
        }
        router.post("/faults/gated/:gate") { request, context in
            try await state.gates.wait(try gate(context))
            return try await echoBody(request)
        }
        router.put("/faults/gated/:gate") { request, context in
            try await state.gates.wait(try gate(context))
            return try await echoBody(request)
        }
        router.get("/faults/hang") { _, _ in
            try await state.gates.wait(Gates.never)
            return Response(status: .ok)
        }
    }

    static func hello() -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"message":"hello"}"#)))
    }

    /// The request's headers, names lower-cased.
    static func headers(of request: Request) -> [String: String] {
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        return headers
    }

    static func echoBody(_ request: Request) async throws -> Response {
        let body = try await request.body.collect(upTo: 1 << 20)
        return try json([
            "method": request.method.rawValue,
            "contentType": request.headers[.contentType] ?? "",
            "body": String(buffer: body),
        ])
    }

    static func json(_ object: [String: String]) throws -> Response {
        let data = try JSONEncoder.sorted.encode(object)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    private static func gate(_ context: DemoRequestContext) throws -> String {
        let name = try context.parameters.require("gate")
        return name.removingPercentEncoding ?? name
    }
}

/// The second listener: another port, so another origin, that records what arrives.
enum EchoRoutes {
    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        router.get("/echo/headers") { request, _ in
            let headers = FaultRoutes.headers(of: request)
            state.crossOriginHeaders.withLock { $0 = headers }
            return try FaultRoutes.json(headers)
        }
    }
}
