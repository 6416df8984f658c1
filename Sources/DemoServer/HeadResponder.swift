import HTTPTypes
import Hummingbird

/// Answers HEAD on every GET route, in one place: the request is routed as the
/// GET it mirrors, through the same middleware, and the answer keeps the GET's
/// status and headers (`Content-Type`, `Content-Length`, `ETag`, ...) but no body.
///
/// For example, wrapping a router's responder:
///
/// ```swift
/// let app = Application(responder: HeadResponder(router.buildResponder()), ...)
/// ```
///
/// Hummingbird's `RouterOptions.autoGenerateHeadEndpoints` does nearly this,
/// but its `Response.createHeadResponse()` adds `Content-Length: 0` to a
/// streamed answer of unknown length (``DemoServer/Fault/huge``), whose GET
/// says `Transfer-Encoding: chunked`. Here such a HEAD keeps the GET's framing
/// headers; NIO's encoder knows the request was a HEAD and sends no body.
struct HeadResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context == DemoRequestContext {
    let inner: Inner

    init(_ inner: Inner) { self.inner = inner }

    func respond(to request: Request, context: DemoRequestContext) async throws -> Response {
        guard request.method == .head else { return try await inner.respond(to: request, context: context) }
        var head = request.head
        head.method = .get
        var context = context
        context.answersHead = true
        let response = try await inner.respond(to: Request(head: head, body: request.body), context: context)
        // A body of unknown length that writes nothing: `Response` adds no
        // `Content-Length` of its own, so the GET's headers go out as they are.
        return Response(status: response.status, headers: response.headers, body: ResponseBody { writer in
            try await writer.finish(nil)
        })
    }
}
