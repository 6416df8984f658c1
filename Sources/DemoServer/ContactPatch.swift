import Foundation
import NIOCore

/// The body of `PATCH /contacts/:id`: a JSON object of the fields to change,
/// each a string, or `null` to clear it (every field but `name`).
///
/// For example, `{"phone": "+44 20 7946 0000", "company": null}` sets the
/// phone and clears the company. A field the contact does not have, a value
/// of another type, a blank name, an e-mail address without `@`, an empty
/// object or a body that is no JSON object is refused (``FieldErrors``, a 422
/// like the CRM's other field errors).
struct ContactPatch: Sendable, Equatable {
    /// Field errors, keyed by field (`base` for the body as a whole), as Rails writes them.
    struct FieldErrors: Error {
        var errors: [String: [String]]
    }

    /// The fields a patch may change.
    static let fields = ["name", "email", "company", "phone"]

    /// The fields to change and their new values; `nil` clears one.
    private(set) var values: [String: String?]

    /// Reads a patch from a request body.
    init(json data: ByteBuffer) throws(FieldErrors) {
        let named = "(\(Self.fields.joined(separator: ", ")))"
        guard let object = (try? JSONSerialization.jsonObject(with: Data(buffer: data))) as? [String: Any] else {
            throw FieldErrors(errors: ["base": ["must be a JSON object of the fields to change \(named)"]])
        }
        guard !object.isEmpty else { throw FieldErrors(errors: ["base": ["names no field to change \(named)"]]) }
        var values: [String: String?] = [:]
        var errors: [String: [String]] = [:]
        for (field, value) in object {
            guard Self.fields.contains(field) else {
                errors[field] = ["is not a contact field \(named)"]
                continue
            }
            let text = value as? String
            if text == nil, !(value is NSNull) {
                errors[field] = [field == "name" ? "must be a string" : "must be a string or null"]
            } else if field == "name", (text ?? "").trimmingCharacters(in: .whitespaces).isEmpty {
                errors[field] = ["can't be blank"]
            } else if field == "email", let text, !text.contains("@") {
                errors[field] = ["is invalid"]
            } else {
                values[field] = .some(text)
            }
        }
        guard errors.isEmpty else { throw FieldErrors(errors: errors) }
        self.values = values
    }

    /// `contact` with the patch's fields changed; its version is the caller's business.
    func applied(to contact: SenbeiRoutes.Entity) -> SenbeiRoutes.Entity {
        var contact = contact
        for (field, value) in values {
            switch field {
            case "name": contact.name = value ?? contact.name
            case "email": contact.email = value
            case "company": contact.company = value
            case "phone": contact.phone = value
            default: break
            }
        }
        return contact
    }
}
