import Depot
import Foundation

/// The server's JSON shapes (snake_case on the wire), kept apart from the
/// records the cache stores, so a change on either side stays local.
enum Wire {
    struct Page<Item: Decodable & Sendable>: Decodable, Sendable {
        var items: [Item]
        var page: Int
        var perPage: Int
        var total: Int
    }

    struct Entity: Decodable, Sendable {
        var id: Int
        var name: String
        var email: String?
        var company: String?
        var phone: String?
        var version: Int?
    }

    struct Comment: Decodable, Sendable {
        var id: Int
        var commentableType: String
        var commentableId: Int
        var comment: String

        var record: CRMComment {
            CRMComment(id: id, commentableType: commentableType, commentableId: commentableId, text: comment)
        }
    }

    struct Task: Decodable, Sendable {
        var id: Int
        var name: String
        var due: String?
        var completed: Bool

        var record: CRMTask { CRMTask(id: id, name: name, due: due, completed: completed) }
    }

    struct Activity: Decodable, Sendable {
        var id: Int
        var action: String
        var subject: String
    }

    struct Errors: Decodable, Sendable {
        var errors: [String: [String]]
    }

    struct NewComment: Encodable, Sendable {
        var commentableType: String
        var commentableId: Int
        var comment: String
    }

    struct NewTask: Encodable, Sendable {
        var name: String
        var due: String?
    }

    struct NewContact: Encodable, Sendable {
        var name: String
        var email: String?
    }

    /// A decoder for the server's snake_case keys (a new one per use: cheap, and no shared state).
    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }

    /// An encoder for the server's snake_case keys.
    @Sendable static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = .sortedKeys
        return encoder
    }

    static func decode<T: Decodable>(_ type: T.Type, from response: NetworkResponse) throws -> T {
        try response.decode(type, using: decoder())
    }
}

/// The server's reasons for refusing a request, from its
/// `{"errors": {"name": ["can't be blank"]}}` body (422, and 404 for a missing record).
///
/// It travels as the ``Depot/DepotError/underlying`` error (also for a change
/// the outbox rolled back); read it with ``Depot/DepotError/validationErrors``:
///
/// ```swift
/// do {
///     _ = try await app.outcome(of: app.createContact(name: ""))
/// } catch {
///     print(error.validationErrors?.fullMessages ?? [])   // ["name can't be blank"]
/// }
/// ```
public struct ValidationErrors: Error, Sendable, Hashable, CustomStringConvertible {
    /// The messages by field; `base` holds those about the record as a whole.
    public let fields: [String: [String]]

    /// Makes the errors from the server's `errors` object.
    public init(fields: [String: [String]]) {
        self.fields = fields
    }

    /// Reads a `{"errors": {...}}` body; `nil` when the body is not one.
    public init?(body: Data) {
        guard let decoded = try? JSONDecoder().decode(Wire.Errors.self, from: body), !decoded.errors.isEmpty else { return nil }
        self.fields = decoded.errors
    }

    /// One sentence per message, as Rails words them: the field, then the message
    /// (`name can't be blank`); `base` messages stand alone. Sorted by field.
    public var fullMessages: [String] {
        fields.keys.sorted().flatMap { field in
            (fields[field] ?? []).map { field == "base" ? $0 : "\(field) \($0)" }
        }
    }

    /// The full messages joined with `; `.
    public var description: String { fullMessages.joined(separator: "; ") }
}

extension DepotError {
    /// The server's reasons, when it refused the request with an `errors` body.
    public var validationErrors: ValidationErrors? { underlying as? ValidationErrors }
}

/// The response check every Senbei operation shares.
enum SenbeiResponse {
    /// Accepts 2xx (and 304 when `acceptsNotModified`); otherwise throws Depot's error
    /// for the status, with the server's `errors` body as the underlying ``ValidationErrors``.
    static func validate(_ response: NetworkResponse, operation: String, acceptsNotModified: Bool = false) throws {
        if (200..<300).contains(response.status) || (acceptsNotModified && response.status == 304) { return }
        var error = DepotError.forStatus(response.status, body: response.body, operation: operation)
        if let reasons = ValidationErrors(body: response.body) {
            error.underlying = reasons
            error.detail = reasons.description
        }
        throw error
    }

    /// An error the outbox reports for a refused change, with the server's
    /// `errors` body (kept in its ``Depot/DepotError/bodyExcerpt``) as the
    /// underlying ``ValidationErrors``, as ``validate(_:operation:acceptsNotModified:)``
    /// gives it, and the operation named `operation`.
    static func enrich(_ error: DepotError, operation: String?) -> DepotError {
        var error = error
        if let operation { error.operation = operation }
        if error.underlying == nil, let excerpt = error.bodyExcerpt, let reasons = ValidationErrors(body: Data(excerpt.utf8)) {
            error.underlying = reasons
            error.detail = reasons.description
        }
        return error
    }

    /// Why a change was refused, in the server's words when it gave some
    /// (`name can't be blank`), else Depot's description of the failure.
    static func reason(for error: DepotError) -> String {
        let enriched = enrich(error, operation: nil)
        return enriched.validationErrors?.description ?? enriched.description
    }
}
