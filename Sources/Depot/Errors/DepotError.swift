import Foundation

/// The one error type Depot reports.
///
/// `DepotError` is a struct rather than an enum so that new codes can be added
/// without breaking code that matches on it. Match on ``code``:
///
/// ```swift
/// do {
///     let feed = try await controller.perform(FetchTimeline())
/// } catch let error as DepotError where error.code == .offline {
///     showOfflineBanner()
/// }
/// ```
///
/// Every error keeps what is known about the failure: the operation's name,
/// the HTTP status, a short excerpt of the body and the underlying error.
public struct DepotError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case unauthorized, notFound, server, unexpectedStatus
            case cancelled, timedOut, offline, connectionLost
            case tooLarge, tooManyRedirects, insecureRedirect
            case dependencyFailed, shutDown
            case decoding, encoding, invalidRequest, processing, transport, storage
            case invalidPage, conflict
        }

        let base: Base

        /// 401 or 403: the credentials are missing, wrong or not enough.
        public static let unauthorized = Code(base: .unauthorized)
        /// 404: the resource does not exist.
        public static let notFound = Code(base: .notFound)
        /// 5xx: the server failed.
        public static let server = Code(base: .server)
        /// Any other status the operation does not accept.
        public static let unexpectedStatus = Code(base: .unexpectedStatus)
        /// The operation was cancelled: by its ticket, by its category, or at shutdown.
        public static let cancelled = Code(base: .cancelled)
        /// No byte arrived within the operation's timeout.
        public static let timedOut = Code(base: .timedOut)
        /// The host could not be reached: connection refused, DNS failure, no route.
        public static let offline = Code(base: .offline)
        /// The connection broke after it was established (reset, closed mid-body, truncated body).
        public static let connectionLost = Code(base: .connectionLost)
        /// The body is larger than the configured limit.
        public static let tooLarge = Code(base: .tooLarge)
        /// More redirects than the limit (10 by default), or a redirect loop.
        public static let tooManyRedirects = Code(base: .tooManyRedirects)
        /// A redirect from https to http, which Depot refuses.
        public static let insecureRedirect = Code(base: .insecureRedirect)
        /// An operation this one depended on failed or was cancelled.
        public static let dependencyFailed = Code(base: .dependencyFailed)
        /// The controller has been shut down.
        public static let shutDown = Code(base: .shutDown)
        /// The body could not be decoded (malformed JSON, XML, ...).
        public static let decoding = Code(base: .decoding)
        /// The request body could not be encoded.
        public static let encoding = Code(base: .encoding)
        /// The request could not be built (no base URL for a relative path, bad URL, ...).
        public static let invalidRequest = Code(base: .invalidRequest)
        /// The operation's `process` failed with an error of its own.
        public static let processing = Code(base: .processing)
        /// The transport failed in a way not covered by a more specific code.
        public static let transport = Code(base: .transport)
        /// The local cache could not be read or written, or none was configured.
        public static let storage = Code(base: .storage)
        /// A paged list's server made no progress: a page that repeats what
        /// earlier pages brought, an empty page that says there are more, or a
        /// malformed or repeated next-page cursor. Paging stops there.
        public static let invalidPage = Code(base: .invalidPage)
        /// A write was refused because the record changed or went on the
        /// server since the version it was based on: a `412 Precondition
        /// Failed`, a `409` the mutation recognises, or a `404`/`410` for an
        /// edit. DepotStore's outbox turns it into a decision (merge, accept
        /// the server's, or keep for the user) rather than a plain rollback.
        public static let conflict = Code(base: .conflict)

        /// The code's stable name, as used in logs and persisted sync status.
        public var rawValue: String { base.rawValue }

        /// The code with this name, if it is one Depot knows.
        public init?(rawValue: String) {
            guard let base = Base(rawValue: rawValue) else { return nil }
            self.base = base
        }

        init(base: Base) {
            self.base = base
        }

        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The name of the operation that failed, when there was one.
    public var operation: String?
    /// The HTTP status the server answered, when there was an answer.
    public var status: Int?
    /// The first bytes of the response body (at most 200 characters), when there was one.
    public var bodyExcerpt: String?
    /// A short detail for the message ("10 redirects", "limit 52428800 bytes").
    public var detail: String?
    /// The error that caused this one: a transport error, a `DecodingError`, or for
    /// ``Code/dependencyFailed`` the dependency's own `DepotError`.
    public var underlying: (any Error)? {
        didSet { redactedUnderlying = nil }
    }
    /// The text of ``underlying`` with its secrets redacted, when it had any
    /// (see ``Redaction``): what ``description`` shows instead.
    var redactedUnderlying: String?

    /// Makes an error. Depot makes these for you; operations may throw their own.
    ///
    /// - Parameters:
    ///   - code: What kind of failure this is.
    ///   - operation: The operation's name.
    ///   - status: The HTTP status, if any.
    ///   - bodyExcerpt: The start of the response body, if any.
    ///   - detail: A short detail for the message.
    ///   - underlying: The error that caused this one.
    public init(
        _ code: Code,
        operation: String? = nil,
        status: Int? = nil,
        bodyExcerpt: String? = nil,
        detail: String? = nil,
        underlying: (any Error)? = nil
    ) {
        self.code = code
        self.operation = operation
        self.status = status
        self.bodyExcerpt = bodyExcerpt
        self.detail = detail
        self.underlying = underlying
    }

    /// One sentence that says what failed and why, for logs.
    ///
    /// For example: `FetchTimeline failed: server answered 503 Service Unavailable (body: "maintenance")`.
    /// A failure of the local cache outside any operation (opening it, say)
    /// names no request, since none was made: `cache error: cannot open the store at …`.
    public var description: String {
        var text: String
        if let operation {
            text = "\(operation) failed: \(reason)"
        } else if code == .storage {
            text = reason
        } else {
            text = "request failed: \(reason)"
        }
        if let bodyExcerpt, !bodyExcerpt.isEmpty {
            text += " (body: \"\(bodyExcerpt)\")"
        }
        return text
    }

    /// The same sentence as ``description``, for `localizedDescription`.
    public var errorDescription: String? { description }

    private var reason: String {
        switch code.base {
        case .unauthorized where status == nil:
            return "not authorized" + detailSuffix(": ")
        case .unauthorized, .notFound, .server, .unexpectedStatus:
            if let status {
                return "server answered \(status) \(HTTPStatus.reasonPhrase(status))"
            }
            return "server answered an unexpected status"
        case .cancelled: return "cancelled"
        case .timedOut: return "timed out" + detailSuffix(" after ")
        case .offline: return "host unreachable (offline)" + underlyingSuffix
        case .connectionLost: return "connection lost" + detailSuffix(": ") + underlyingSuffix
        case .tooLarge: return "body too large" + detailSuffix(" (", ")")
        case .tooManyRedirects: return "too many redirects" + detailSuffix(" (", ")")
        case .insecureRedirect: return "refused a redirect from https to http" + detailSuffix(" (", ")")
        case .dependencyFailed:
            if let cause = underlying as? DepotError {
                return "a dependency failed: \(cause)"
            }
            return "a dependency failed"
        case .shutDown: return "the network controller is shut down"
        case .decoding: return "could not decode the response" + underlyingSuffix
        case .encoding: return "could not encode the request body" + underlyingSuffix
        case .invalidRequest: return "invalid request" + detailSuffix(": ")
        case .processing: return "processing failed" + underlyingSuffix
        case .transport: return "transport error" + detailSuffix(": ") + underlyingSuffix
        case .storage: return "cache error" + detailSuffix(": ") + underlyingSuffix
        case .invalidPage: return "invalid page" + detailSuffix(": ")
        case .conflict: return "conflict" + detailSuffix(": ")
        }
    }

    private func detailSuffix(_ prefix: String, _ suffix: String = "") -> String {
        guard let detail else { return "" }
        return prefix + detail + suffix
    }

    private var underlyingSuffix: String {
        guard let underlying else { return "" }
        return " (\(Self.clipped(redactedUnderlying ?? String(describing: underlying), limit: 160)))"
    }

    /// The first `limit` characters of `text`, with "…" where it was cut and
    /// the brackets it cut open closed again, so that the sentence around it
    /// stays balanced: "(connectionErrors: [refused (errno 111…])".
    static func clipped(_ text: String, limit: Int) -> String {
        guard text.count > limit else { return text }
        var cut = String(text.prefix(limit)) + "…"
        var open: [Character] = []
        for character in cut {
            switch character {
            case "(": open.append(")")
            case "[": open.append("]")
            case "{": open.append("}")
            case ")", "]", "}":
                if open.last == character { open.removeLast() }
            default: break
            }
        }
        cut.append(contentsOf: open.reversed())
        return cut
    }

    /// Builds the error for a status the operation does not accept, following the
    /// default mapping: 401/403 → unauthorized, 404 → notFound, 5xx → server, else unexpectedStatus.
    public static func forStatus(_ status: Int, body: Data = Data(), operation: String? = nil) -> DepotError {
        let code: Code
        switch status {
        case 401, 403: code = .unauthorized
        case 404: code = .notFound
        case 500...599: code = .server
        default: code = .unexpectedStatus
        }
        return DepotError(code, operation: operation, status: status, bodyExcerpt: excerpt(of: body))
    }

    /// The first `limit` characters of a body, as text, with control characters removed.
    static func excerpt(of body: Data, limit: Int = 200) -> String? {
        guard !body.isEmpty else { return nil }
        let text = String(decoding: body.prefix(limit * 4), as: UTF8.self)
        let cleaned = text.unicodeScalars
            .map { CharacterSet.controlCharacters.contains($0) ? " " : String($0) }
            .joined()
            .trimmingCharacters(in: .whitespaces)
        return cleaned.isEmpty ? nil : String(cleaned.prefix(limit))
    }

    /// A copy with the operation name filled in when it was missing.
    func named(_ name: String) -> DepotError {
        var copy = self
        if copy.operation == nil { copy.operation = name }
        return copy
    }
}

extension DepotError {
    /// Wraps any error as a `DepotError`: a `DepotError` stays as it is,
    /// cancellation becomes ``Code/cancelled``, `DecodingError` becomes ``Code/decoding``.
    public static func wrap(_ error: any Error, operation: String?, fallback: Code) -> DepotError {
        if let error = error as? DepotError {
            return operation.map(error.named) ?? error
        }
        if error is CancellationError {
            return DepotError(.cancelled, operation: operation)
        }
        if error is DecodingError {
            return DepotError(.decoding, operation: operation, underlying: error)
        }
        return DepotError(fallback, operation: operation, underlying: error)
    }
}
