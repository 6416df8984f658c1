import Foundation

extension FeedText {
    /// The plain text of an Atom text construct (`title`, `summary`) or
    /// `content`, from its characters as the XML parser read them (child
    /// elements already read as markup), its `type` and Atom 0.3's `mode`.
    ///
    /// - Atom 1.0's `type` is `text` (the default), `html` or `xhtml`, or on
    ///   `content` a media type.
    /// - Atom 0.3's `type` is a media type, `text/plain` by default, and its
    ///   `mode` says how the text is written: `xml` (the default: child
    ///   elements), `escaped` or `base64`. Escaped and base64 text is taken
    ///   for HTML unless its type says plain text, as feeds mean it.
    /// - Base64 of a type that is not text (an image), and base64 that is not
    ///   text at all (see ``decodingBase64(_:)``), give `""`: the item goes on
    ///   as if the feed had left the field out (a title falls back to the
    ///   summary's start, a summary to the content).
    ///
    /// Decoded text is text from the network like any other: it keeps its
    /// control characters, as the cache keeps every field's, and
    /// ``TextLayout/TextLayout/terminalSafe(_:)`` shows them harmlessly.
    ///
    /// For example, `atomText("PGI+SGk8L2I+", type: "text/html", mode: "base64")` is `"Hi"`.
    static func atomText(_ text: String, type: String?, mode: String?) -> String {
        let type = (type ?? "").lowercased()
        var text = text
        if mode == "base64" {
            guard isText(mediaType: type), let decoded = decodingBase64(text) else { return "" }
            text = decoded
        }
        let isHTML = type == "html" || type.hasPrefix("text/html")
            || ((mode == "escaped" || mode == "base64") && !type.hasPrefix("text/plain"))
        return isHTML ? plainText(fromHTML: text) : collapsingWhitespace(text)
    }

    /// Whether an Atom `type` (a name of 1.0's or a media type; empty for
    /// none) says the element holds text: plain, HTML or XML.
    static func isText(mediaType type: String) -> Bool {
        type.isEmpty || type == "text" || type == "html" || type == "xhtml" || type.hasPrefix("text/")
            || type.hasSuffix("+xml") || type.hasSuffix("/xml")
    }

    /// The UTF-8 text that `encoded` stands for in base64, or `nil` when it
    /// stands for none.
    ///
    /// Whitespace anywhere is skipped (MIME wraps base64 at 76 characters, and
    /// feeds indent it), and padding may be left out or overdone. A character
    /// outside the base64 alphabet, padding before the end, a length no whole
    /// byte fits, or bytes that are not UTF-8 give `nil`, never a throw.
    ///
    /// Decoding never grows a field: the text holds at most three bytes for
    /// every four characters of `encoded`, which the parser already holds, so
    /// base64 costs no more memory than the same field written plainly.
    ///
    /// For example, `decodingBase64("SGVs\n bG8")` is `"Hello"`.
    static func decodingBase64(_ encoded: String) -> String? {
        var digits: [UInt8] = []
        digits.reserveCapacity(encoded.utf8.count)
        for byte in encoded.utf8 where byte != 0x20 && byte != 0x09 && byte != 0x0A && byte != 0x0D {
            digits.append(byte)
        }
        while digits.last == UInt8(ascii: "=") { digits.removeLast() }
        guard digits.count % 4 != 1 else { return nil }
        digits += repeatElement(UInt8(ascii: "="), count: (4 - digits.count % 4) % 4)
        guard let bytes = Data(base64Encoded: Data(digits)) else { return nil }
        return String(data: bytes, encoding: .utf8)
    }
}
