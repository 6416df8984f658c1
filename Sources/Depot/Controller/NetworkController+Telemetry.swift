import Foundation
import Instrumentation
import Tracing

/// The controller's telemetry hooks: a client span per attempt (see ``Telemetry``).
extension NetworkController {
    /// Starts the span of one attempt's transfer and injects its context into
    /// `request`'s headers; `nil` without a tracer.
    func startSpan(operation name: String, request: inout TransportRequest, attempt: Int, parent: ServiceContext?) -> AttemptSpan? {
        guard let tracer = telemetry.tracer else { return nil }
        let method = request.method.rawValue
        let span = tracer.startSpan(method, context: parent ?? .topLevel, ofKind: .client)
        let url = request.url
        span.attributes["http.request.method"] = method
        span.attributes["url.full"] = Self.redactedForSpan(url)
        span.attributes["url.scheme"] = url.scheme
        if let host = url.host { span.attributes["server.address"] = host }
        if let port = url.port ?? (url.scheme == "https" ? 443 : url.scheme == "http" ? 80 : nil) {
            span.attributes["server.port"] = port
        }
        if attempt > 1 { span.attributes["http.request.resend_count"] = attempt - 1 }
        span.attributes["depot.operation"] = name
        tracer.inject(span.context, into: &request.headers, using: HeaderFieldsInjector())
        return AttemptSpan(span: span)
    }

    /// The URL without user, password and query values (`?token=REDACTED`).
    static func redactedForSpan(_ url: URL) -> String {
        guard url.query != nil || url.user != nil || url.password != nil,
              var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        else { return url.absoluteString }
        components.user = nil
        components.password = nil
        components.queryItems = components.queryItems?.map { URLQueryItem(name: $0.name, value: $0.value == nil ? nil : "REDACTED") }
        return components.string ?? url.absoluteString
    }
}
