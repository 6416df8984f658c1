import Depot
import Foundation

/// What libxml2 will read a feed as, checked before it parses: a document it
/// reads as UTF-8 must be UTF-8, which libxml2 itself lets slip in names,
/// comments and processing instructions (Foundation's `XMLParser` trapped on
/// those; the fuzzers found it, Fuzz/README.md).
///
/// A document libxml2 converts (a UTF-16 byte order mark, or a well-formed
/// declaration of another encoding) is left to libxml2, which reports bad
/// bytes as parse errors. Every other document is read as UTF-8, so it must be
/// UTF-8: a byte that is not fails with `.decoding` and its offset, before parsing.
enum FeedEncoding {
    /// Throws `.decoding` when libxml2 would read `data` as UTF-8 and it is not.
    static func check(_ data: Data) throws(DepotError) {
        guard try readsAsUTF8(head: data.prefix(headLength)) else { return }
        if let offset = firstInvalidUTF8(data) {
            throw invalidUTF8(at: offset)
        }
    }

    /// How many of a document's first bytes tell how libxml2 will read it.
    static let headLength = 256

    /// Whether libxml2 will read a document that starts with `head` (its first
    /// ``headLength`` bytes, or all of a shorter one) as UTF-8, so that its
    /// bytes must be checked. Throws for a declaration of UTF-16 without a byte order mark.
    static func readsAsUTF8(head: Data) throws(DepotError) -> Bool {
        if head.starts(with: [0xFF, 0xFE]) || head.starts(with: [0xFE, 0xFF]) { return false }
        if let declared = declaredEncoding(Array(head)) {
            switch declared {
            case "utf-8", "utf8":
                break
            case "utf-16", "utf-16le", "utf-16be", "utf16":
                throw FeedParseFailure.error("the feed declares UTF-16 but has no byte order mark")
            default:
                return false  // a single-byte encoding libxml2 converts, or one it refuses with an error
            }
        }
        return true
    }

    /// The error for a byte that breaks UTF-8 at `offset`.
    static func invalidUTF8(at offset: Int) -> DepotError {
        FeedParseFailure.error("the feed is not valid UTF-8 (byte \(offset))")
    }

    /// How many of `bytes` end with a complete UTF-8 sequence: the rest (at
    /// most 3 bytes) is the start of a sequence the next chunk completes.
    static func completePrefixLength(_ bytes: Data) -> Int {
        let count = bytes.count
        var index = count
        var seen = 0
        while index > 0, seen < 3 {
            index -= 1
            seen += 1
            let byte = bytes[bytes.startIndex + index]
            if byte & 0xC0 == 0x80 { continue }  // a continuation byte: look further back for its lead
            let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1
            return count - index < length ? index : count
        }
        return count
    }

    /// The encoding of an XML declaration as libxml2 reads it (version first,
    /// then encoding), lower-cased; `nil` without one.
    static func declaredEncoding(_ head: [UInt8]) -> String? {
        var bytes = head[...]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasPrefix("<?xml"), let end = text.range(of: "?>") else { return nil }
        let declaration = text[text.index(text.startIndex, offsetBy: 5)..<end.lowerBound]
        // Pseudo-attributes in order: version, then encoding.
        let pairs = pseudoAttributes(String(declaration))
        // libxml2 reads the encoding only after a version it accepts: "1." and digits.
        guard let version = pairs.first, version.name == "version", version.value.hasPrefix("1."), version.value.count > 2,
              version.value.dropFirst(2).allSatisfy({ $0.isASCII && $0.isNumber }),
              pairs.count > 1, pairs[1].name == "encoding" else { return nil }
        // And only an encoding name as XML spells one: [A-Za-z][A-Za-z0-9._-]*.
        let name = pairs[1].value
        guard let first = name.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
              name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) })
        else { return nil }
        return name.lowercased()
    }

    private static func pseudoAttributes(_ text: String) -> [(name: String, value: String)] {
        var result: [(String, String)] = []
        var rest = Substring(text)
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
            guard let equals = rest.firstIndex(of: "=") else { return result }
            let name = rest[..<equals].trimmingCharacters(in: .whitespaces)
            rest = rest[rest.index(after: equals)...].drop { $0 == " " || $0 == "\t" }
            guard let quote = rest.first, quote == "\"" || quote == "'" else { return result }
            rest = rest.dropFirst()
            guard let close = rest.firstIndex(of: quote) else { return result }
            result.append((name, String(rest[..<close])))
            rest = rest[rest.index(after: close)...]
        }
    }

    /// The offset of the first byte that breaks UTF-8 (overlong forms,
    /// surrogates and values past U+10FFFF included), or `nil`.
    static func firstInvalidUTF8(_ data: Data) -> Int? {
        data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Int? in
            let bytes = raw.bindMemory(to: UInt8.self)
            var i = 0
            let count = bytes.count
            while i < count {
                let lead = bytes[i]
                if lead < 0x80 {
                    i += 1
                    continue
                }
                let length: Int
                var low: UInt8 = 0x80
                var high: UInt8 = 0xBF
                switch lead {
                case 0xC2...0xDF: length = 2
                case 0xE0: length = 3; low = 0xA0
                case 0xE1...0xEC, 0xEE...0xEF: length = 3
                case 0xED: length = 3; high = 0x9F
                case 0xF0: length = 4; low = 0x90
                case 0xF1...0xF3: length = 4
                case 0xF4: length = 4; high = 0x8F
                default: return i
                }
                guard i + length <= count else { return i }
                let second = bytes[i + 1]
                guard second >= low, second <= high else { return i }
                for k in 2..<length where bytes[i + k] & 0xC0 != 0x80 { return i }
                i += length
            }
            return nil
        }
    }
}
