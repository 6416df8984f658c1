import Foundation

/// Cleans the text fields of feed items: whitespace, HTML, entities, breadcrumbs.
enum FeedText {
    /// Collapses every run of whitespace (newlines, tabs, no-break spaces) into
    /// one space and trims the ends.
    static func collapsingWhitespace(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        var pendingSpace = false
        for character in text {
            if character.isWhitespace {
                pendingSpace = !result.isEmpty
            } else {
                if pendingSpace { result.append(" ") }
                pendingSpace = false
                result.append(character)
            }
        }
        return result
    }

    /// The text of an HTML fragment: tags dropped (block tags become spaces),
    /// entities decoded, whitespace collapsed.
    ///
    /// For example, `<p>A &amp; <b>B</b></p>` becomes `A & B`.
    static func plainText(fromHTML html: String) -> String {
        guard html.contains("<") || html.contains("&") else { return collapsingWhitespace(html) }
        var text = ""
        text.reserveCapacity(html.utf8.count)
        var index = html.startIndex
        // Once no ">" follows, none follows any later "<" either: stop looking
        // (each "<" would otherwise rescan to the end: quadratic on "<<<<…").
        var closesLeft = true
        while index < html.endIndex {
            let character = html[index]
            if character == "<", closesLeft {
                if let close = html[index...].firstIndex(of: ">") {
                    let tag = html[html.index(after: index)..<close]
                    // Tags never join words: "a<br>b" reads "a b". Inline tags rarely sit inside words.
                    if tag.first.map({ $0.isLetter || $0 == "/" || $0 == "!" }) == true {
                        text.append(" ")
                        index = html.index(after: close)
                        continue
                    }
                } else {
                    closesLeft = false
                }
            }
            text.append(character)
            index = html.index(after: index)
        }
        return collapsingWhitespace(decodingEntities(text))
    }

    /// Decodes HTML character references: the XML five, the common HTML names,
    /// and numeric ones (`&#8217;`, `&#x2014;`). Unknown names stay as they are.
    static func decodingEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count)
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            guard character == "&" else {
                result.append(character)
                index = text.index(after: index)
                continue
            }
            // A reference is at most a few characters up to ';'.
            let limit = text.index(index, offsetBy: 12, limitedBy: text.endIndex) ?? text.endIndex
            if let semicolon = text[index..<limit].firstIndex(of: ";"),
               let decoded = entity(text[text.index(after: index)..<semicolon]) {
                result.append(decoded)
                index = text.index(after: semicolon)
            } else {
                result.append(character)
                index = text.index(after: index)
            }
        }
        return result
    }

    private static func entity(_ name: Substring) -> String? {
        if name.hasPrefix("#") {
            let digits = name.dropFirst()
            let value: UInt32?
            if digits.first == "x" || digits.first == "X" {
                value = UInt32(digits.dropFirst(), radix: 16)
            } else {
                value = UInt32(digits)
            }
            guard let value, let scalar = Unicode.Scalar(value) else { return nil }
            return String(Character(scalar))
        }
        return namedEntities[String(name)]
    }

    private static let namedEntities: [String: String] = [
        "amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'", "nbsp": "\u{00A0}",
        "ndash": "\u{2013}", "mdash": "\u{2014}", "lsquo": "\u{2018}", "rsquo": "\u{2019}",
        "ldquo": "\u{201C}", "rdquo": "\u{201D}", "hellip": "\u{2026}", "copy": "\u{00A9}",
        "reg": "\u{00AE}", "trade": "\u{2122}", "euro": "\u{20AC}", "laquo": "\u{00AB}", "raquo": "\u{00BB}",
        "eacute": "\u{00E9}", "egrave": "\u{00E8}", "uuml": "\u{00FC}", "ouml": "\u{00F6}", "auml": "\u{00E4}", "szlig": "\u{00DF}",
    ]

    /// The forum's title without its breadcrumbs, as the original Nerdfeed trimmed
    /// it with the pattern `.* :: (.*) :: .*`.
    ///
    /// The pattern is greedy, so the part kept is the one before the last: with
    /// three parts that is the middle one (`"Chapter 7 :: View Controllers :: Re:
    /// fetch"` → `"View Controllers"`), with four it is the third. A title with
    /// fewer than three parts does not match the pattern and stays as it is, as
    /// it did in the original; so does one whose kept part would be empty.
    static func removingBreadcrumbs(_ title: String) -> String {
        let parts = title.components(separatedBy: " :: ")
        guard parts.count >= 3 else { return title }
        let kept = parts[parts.count - 2].trimmingCharacters(in: .whitespaces)
        return kept.isEmpty ? title : kept
    }
}
