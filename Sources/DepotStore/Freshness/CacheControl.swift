import Depot

/// The `Cache-Control` directives of a response that decide how long a
/// private cache may use it (RFC 9111 §5.2.2), read leniently.
///
/// Directive names are case-insensitive; values may be tokens or quoted
/// strings (a comma inside quotes does not end a directive); several header
/// lines count as one list. When a directive comes more than once, the most
/// restrictive one counts: the smallest `max-age`, the smallest
/// `stale-while-revalidate`. A `max-age` whose value is not a number
/// (`max-age=soon`, `max-age=-1`, none at all) counts as `max-age=0`, as
/// RFC 9111 §4.2.1 encourages; a bad `stale-while-revalidate` gives no
/// window. Numbers beyond 2³¹ seconds count as 2³¹ (RFC 9111 §1.2.2).
/// Anything else is ignored: unknown directives, garbage between commas,
/// and what only a shared cache heeds (`s-maxage`, `public`,
/// `proxy-revalidate`), since the store is one app's own cache.
///
/// For example:
///
/// ```swift
/// let directives = CacheControl(["max-age=60, Stale-While-Revalidate=\"30\""])
/// directives.maxAge                 // 60
/// directives.staleWhileRevalidate   // 30
/// ```
struct CacheControl: Sendable, Hashable {
    /// `max-age`, in seconds.
    var maxAge: Int?
    /// `stale-while-revalidate`, in seconds.
    var staleWhileRevalidate: Int?
    /// `no-cache`, with or without a field list (treated as if without: the
    /// whole response is revalidated).
    var noCache = false
    /// `no-store`.
    var noStore = false
    /// `must-revalidate`: once stale, never shown without asking first, so
    /// no `stale-while-revalidate` window.
    var mustRevalidate = false

    /// The greatest number of seconds a delta-seconds value can say (RFC 9111 §1.2.2).
    static let maxDeltaSeconds = 1 << 31

    /// The directives of every `Cache-Control` field in `headers`.
    init(_ headers: HeaderFields) {
        self.init(headers.values(for: "Cache-Control"))
    }

    /// The directives of these `Cache-Control` field values, in order.
    init(_ values: [String]) {
        for directive in values.flatMap(Self.directives(in:)) {
            switch directive.name {
            case "max-age":
                let seconds = directive.value.flatMap(Self.deltaSeconds) ?? 0
                maxAge = min(maxAge ?? seconds, seconds)
            case "stale-while-revalidate":
                let seconds = directive.value.flatMap(Self.deltaSeconds) ?? 0
                staleWhileRevalidate = min(staleWhileRevalidate ?? seconds, seconds)
            case "no-cache": noCache = true
            case "no-store": noStore = true
            case "must-revalidate": mustRevalidate = true
            default: break
            }
        }
    }

    /// A delta-seconds value (RFC 9111 §1.2.2): ASCII digits only, at most
    /// ``maxDeltaSeconds``; `nil` when `text` is anything else.
    static func deltaSeconds(_ text: some StringProtocol) -> Int? {
        guard !text.isEmpty else { return nil }
        var seconds = 0
        for byte in text.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            seconds = min(seconds * 10 + Int(byte - UInt8(ascii: "0")), maxDeltaSeconds)
        }
        return seconds
    }

    /// The directives of one field value: lower-cased names, and values with
    /// their quotes and escapes removed. A directive whose name is not a
    /// token, or whose quoted value never ends, is left out.
    static func directives(in value: String) -> [(name: String, value: String?)] {
        var directives: [(name: String, value: String?)] = []
        var index = value.startIndex
        while index < value.endIndex {
            // The name, up to `=` or the next comma.
            var name = ""
            while index < value.endIndex, value[index] != "=", value[index] != "," {
                name.append(value[index])
                index = value.index(after: index)
            }
            var argument: String?
            var valid = true
            if index < value.endIndex, value[index] == "=" {
                index = value.index(after: index)
                while index < value.endIndex, value[index] == " " || value[index] == "\t" {
                    index = value.index(after: index)
                }
                if index < value.endIndex, value[index] == "\"" {
                    // A quoted string: up to the closing quote, `\` escaping one character.
                    var text = ""
                    var closed = false
                    index = value.index(after: index)
                    while index < value.endIndex {
                        let character = value[index]
                        index = value.index(after: index)
                        if character == "\"" {
                            closed = true
                            break
                        }
                        if character == "\\", index < value.endIndex {
                            text.append(value[index])
                            index = value.index(after: index)
                        } else {
                            text.append(character)
                        }
                    }
                    valid = closed
                    argument = text
                }
                // A token, or what follows a quoted string: up to the next comma.
                var rest = ""
                while index < value.endIndex, value[index] != "," {
                    rest.append(value[index])
                    index = value.index(after: index)
                }
                if argument == nil {
                    argument = rest.trimmingWhitespace()
                } else if !rest.trimmingWhitespace().isEmpty {
                    valid = false
                }
            }
            if index < value.endIndex { index = value.index(after: index) }  // the comma
            let trimmed = name.trimmingWhitespace().lowercased()
            if valid, !trimmed.isEmpty, trimmed.utf8.allSatisfy(isTokenByte) {
                directives.append((trimmed, argument))
            }
        }
        return directives
    }

    /// Whether `byte` may be part of a token (RFC 9110 §5.6.2).
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

extension String {
    /// The text without spaces and tabs at either end (HTTP's optional whitespace).
    fileprivate func trimmingWhitespace() -> String {
        let isWhitespace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isWhitespace($0) }), let last = lastIndex(where: { !isWhitespace($0) }) else { return "" }
        return String(self[first...last])
    }
}
