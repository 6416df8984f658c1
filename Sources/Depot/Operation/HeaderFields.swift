/// An ordered list of HTTP header fields with case-insensitive lookup.
///
/// For example:
///
/// ```swift
/// var headers: HeaderFields = ["Accept": "application/json"]
/// headers["accept"]            // "application/json"
/// headers.add(name: "Cookie", value: "a=1")
/// ```
public struct HeaderFields: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One header field.
    public struct Field: Sendable, Hashable {
        /// The field name as given.
        public var name: String
        /// The field value.
        public var value: String

        /// Makes a field.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    private var fields: [Field]

    /// Makes an empty header list.
    public init() { fields = [] }

    /// Makes a header list from name/value pairs, keeping their order.
    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value for `name` (case-insensitive). Setting replaces every field
    /// of that name; setting `nil` removes them.
    public subscript(name: String) -> String? {
        get { fields.first { $0.name.caseInsensitiveEquals(name) }?.value }
        set {
            guard let newValue else {
                remove(name: name)
                return
            }
            if let index = fields.firstIndex(where: { $0.name.caseInsensitiveEquals(name) }) {
                fields[index].value = newValue
                fields.removeAll { $0.name.caseInsensitiveEquals(name) && $0.value != newValue }
            } else {
                fields.append(Field(name: name, value: newValue))
            }
        }
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    /// Appends a field, keeping any existing ones with the same name.
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Removes every field named `name`.
    public mutating func remove(name: String) {
        fields.removeAll { $0.name.caseInsensitiveEquals(name) }
    }

    /// Whether a field named `name` is present.
    public func contains(_ name: String) -> Bool {
        fields.contains { $0.name.caseInsensitiveEquals(name) }
    }

    /// The number of fields.
    public var count: Int { fields.count }

    /// Reserves storage for at least `minimumCapacity` fields in all, so that adding
    /// fields up to that count does not reallocate.
    public mutating func reserveCapacity(_ minimumCapacity: Int) {
        fields.reserveCapacity(minimumCapacity)
    }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// Credentials a redirect to another origin always drops, whatever the
    /// controller's ``Redaction`` says (it drops the secret headers of that list too).
    static let credentialNames: Set<String> = ["authorization", "cookie", "proxy-authorization"]

    /// The fields as text with the secret values of ``Redaction/default`` replaced
    /// by `<redacted>`, for logs. A controller logs with its own
    /// ``NetworkController/Configuration/Observability/redaction``.
    public var description: String {
        Redaction.default.headers(self)
    }
}

extension String {
    /// ASCII case-insensitive equality, without allocating (header names are ASCII tokens).
    func caseInsensitiveEquals(_ other: String) -> Bool {
        let lhs = self.utf8
        let rhs = other.utf8
        guard lhs.count == rhs.count else { return false }
        for (a, b) in zip(lhs, rhs) where a != b {
            let lowerA = (a >= 65 && a <= 90) ? a | 0x20 : a
            let lowerB = (b >= 65 && b <= 90) ? b | 0x20 : b
            if lowerA != lowerB { return false }
        }
        return true
    }
}
