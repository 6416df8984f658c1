import Foundation

/// Inputs that crash code outside Depot's control, which the fuzz targets
/// skip so that fuzzing goes on past them. Each has a test in
/// `Tests/FuzzTests/KnownIssueTests.swift` that is a known issue while the
/// crash lasts, and fails once it is gone, to say the skip can go too.
package enum KnownIssues {
    /// Whether FoundationXML's `XMLParser` (Swift 6.3.1, Linux) crashes on
    /// `data`, for one of two reasons:
    ///
    /// - A processing instruction without data, `<?pi?>` (well-formed XML):
    ///   libxml2 passes a null data pointer, which `XMLParser` hands to
    ///   `strlen` (SIGSEGV), whether or not the delegate handles instructions.
    /// - Bytes that are not UTF-8 in a document read as UTF-8, in an element
    ///   or attribute name, a namespace prefix, a comment or a processing
    ///   instruction's target: libxml2 lets them through and `XMLParser`
    ///   force-unwraps their conversion to `String` (SIGILL). In text and
    ///   attribute values they are parse errors instead.
    ///
    /// Both are matched generously: a false match only skips an input.
    package static func xmlParserTraps(on data: Data) -> Bool {
        hasInstructionWithoutData(data) || isInvalidUTF8ReadAsUTF8(data)
    }

    /// Whether `data` holds `<?`, a name, then `?>` at once.
    static func hasInstructionWithoutData(_ data: Data) -> Bool {
        let bytes = [UInt8](data)
        var index = 0
        while index + 1 < bytes.count {
            guard bytes[index] == UInt8(ascii: "<"), bytes[index + 1] == UInt8(ascii: "?") else {
                index += 1
                continue
            }
            var end = index + 2
            while end < bytes.count, ![0x20, 0x09, 0x0D, 0x0A, UInt8(ascii: "?"), UInt8(ascii: ">")].contains(bytes[end]) { end += 1 }
            if end > index + 2, end + 1 < bytes.count, bytes[end] == UInt8(ascii: "?"), bytes[end + 1] == UInt8(ascii: ">") { return true }
            index += 2
        }
        return false
    }

    /// Whether `data` is read by libxml2 as UTF-8 but is not valid UTF-8.
    ///
    /// A document is read as UTF-8 unless it starts with a UTF-16 byte order
    /// mark or pattern, or its XML declaration names another encoding (then
    /// libxml2 converts it, and a byte it cannot convert is an error). A
    /// declaration of UTF-16 without a byte order mark is read as UTF-8.
    static func isInvalidUTF8ReadAsUTF8(_ data: Data) -> Bool {
        guard String(validating: data, as: UTF8.self) == nil else { return false }
        var head = Array(data.prefix(512))
        if head.starts(with: [0xFE, 0xFF]) || head.starts(with: [0xFF, 0xFE])
            || head.starts(with: [0x00, 0x3C]) || head.starts(with: [0x3C, 0x00]) {
            return false
        }
        if head.starts(with: [0xEF, 0xBB, 0xBF]) { head.removeFirst(3) }
        guard let encoding = declaredEncoding(head) else { return true }
        return ["utf-8", "utf8", "utf-16", "utf16"].contains(encoding.lowercased())
    }

    /// The encoding named by a well-formed XML declaration at the start of
    /// `head` (`<?xml version="1.0" encoding="ISO-8859-1"?>`), or `nil`: libxml2
    /// switches encodings only for a declaration of that shape, version first.
    static func declaredEncoding(_ head: [UInt8]) -> String? {
        var scanner = Scanner(bytes: head)
        guard scanner.take("<?xml"), scanner.spaces(), scanner.take("version"), scanner.equals(),
              let version = scanner.quoted(), version.hasPrefix("1."), version.count > 2,
              version.dropFirst(2).allSatisfy({ $0.isASCII && $0.isNumber }),
              scanner.spaces(), scanner.take("encoding"), scanner.equals(),
              let name = scanner.quoted(), let first = name.first, first.isLetter,
              name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else { return nil }
        return name
    }

    /// Just enough of a scanner for the XML declaration.
    private struct Scanner {
        var bytes: [UInt8]
        var index = 0

        /// Takes `literal` if it comes next.
        mutating func take(_ literal: String) -> Bool {
            let expected = Array(literal.utf8)
            guard bytes[index...].starts(with: expected) else { return false }
            index += expected.count
            return true
        }

        /// Takes one or more spaces (XML's S).
        mutating func spaces() -> Bool {
            let start = index
            while index < bytes.count, [0x20, 0x09, 0x0D, 0x0A].contains(bytes[index]) { index += 1 }
            return index > start
        }

        /// Takes XML's Eq: `=` with optional spaces around it.
        mutating func equals() -> Bool {
            _ = spaces()
            guard take("=") else { return false }
            _ = spaces()
            return true
        }

        /// Takes a value in single or double quotes and returns it.
        mutating func quoted() -> String? {
            guard index < bytes.count, bytes[index] == 0x22 || bytes[index] == 0x27 else { return nil }
            let quote = bytes[index]
            guard let end = bytes[(index + 1)...].firstIndex(of: quote) else { return nil }
            defer { index = end + 1 }
            return String(decoding: bytes[(index + 1)..<end], as: UTF8.self)
        }
    }
}
