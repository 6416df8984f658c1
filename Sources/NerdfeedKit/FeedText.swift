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

    /// The text of an HTML fragment: tags dropped (inline ones such as `<b>`
    /// and `<a>` join what they separate, as a browser shows it; others become
    /// spaces), the contents of `script` and `style` elements and comments
    /// dropped, entities decoded, whitespace collapsed.
    ///
    /// For example, `<p>A &amp; <b>B</b>!</p><p>C</p>` becomes `A & B! C`.
    static func plainText(fromHTML html: String) -> String {
        guard html.contains("<") || html.contains("&") else { return collapsingWhitespace(html) }
        var text = ""
        text.reserveCapacity(html.utf8.count)
        var index = html.startIndex
        // Once no ">" follows, none follows any later "<" either: stop looking
        // (each "<" would otherwise rescan to the end: quadratic on "<<<<…").
        // The same for the end of a script, a style or a comment.
        var closesLeft = true
        var unclosed: Set<String> = []
        while index < html.endIndex {
            let character = html[index]
            if character == "<", closesLeft {
                if let close = html[index...].firstIndex(of: ">") {
                    let tag = html[html.index(after: index)..<close]
                    // "a<br>b" reads "a b"; "<b>x</b>," reads "x,".
                    if tag.first.map({ $0.isLetter || $0 == "/" || $0 == "!" }) == true {
                        if !isInline(tag: tag) { text.append(" ") }
                        index = skipping(tag, in: html, after: html.index(after: close), unclosed: &unclosed)
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

    /// The elements a browser lays out in the line: their tags separate nothing.
    static let inlineElements: Set<String> = [
        "a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font", "i", "ins",
        "kbd", "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "var",
    ]

    /// Whether an element named `name` (any case) is one of ``inlineElements``.
    static func isInline(_ name: some StringProtocol) -> Bool {
        name.count <= 6 && inlineElements.contains(name.lowercased())
    }

    /// Whether the text of a tag (between `<` and `>`: `b`, `/b`, `span class=x`) is an inline element's.
    private static func isInline(tag: Substring) -> Bool {
        let name = (tag.first == "/" ? tag.dropFirst() : tag).prefix { $0.isLetter }
        return !name.isEmpty && isInline(name)
    }

    /// Where the text goes on after `tag`, which ended just before `next`: past
    /// the end of a comment, or of a `script` or `style` element, whose contents
    /// are not text to show; else `next`. An end that never comes is looked for
    /// once, and the tag is then dropped alone.
    private static func skipping(_ tag: Substring, in html: String, after next: String.Index, unclosed: inout Set<String>) -> String.Index {
        let end: String
        if tag.hasPrefix("!--") {
            // A comment may hold ">": it ends at "-->" (the tag may already be all of it).
            guard !(tag.count >= 5 && tag.hasSuffix("--")) else { return next }
            end = "-->"
        } else {
            let name = tag.prefix { $0.isLetter }.lowercased()
            guard name == "script" || name == "style", !tag.hasSuffix("/") else { return next }
            end = "</" + name
        }
        guard !unclosed.contains(end) else { return next }
        guard let found = html.range(of: end, options: .caseInsensitive, range: next..<html.endIndex) else {
            unclosed.insert(end)
            return next
        }
        if end == "-->" { return found.upperBound }
        // The end tag's own ">" (or the rest, if it has none).
        return html[found.upperBound...].firstIndex(of: ">").map { html.index(after: $0) } ?? html.endIndex
    }

    /// Decodes HTML character references: every HTML 4 name (``htmlEntities``)
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
        return htmlEntities[String(name)].flatMap(Unicode.Scalar.init).map { String(Character($0)) }
    }

    /// The forum's title without its breadcrumbs, as the original Nerdfeed trimmed
    /// it with the pattern `.* :: (.*) :: .*`.
    ///
    /// The pattern is greedy, so the part kept is the one before the last: with
    /// three parts that is the middle one (`"Chapter 7 :: View Controllers :: Re:
    /// fetch"` → `"View Controllers"`), with four it is the third. A title with
    /// fewer than three parts does not match the pattern and stays as it is, as
    /// it did in the original; so does one whose kept part would be empty.
    static func removingBreadcrumbs(_ title: String) -> String {
        // Most titles have no breadcrumbs: two " :: " are needed, so look for them first.
        guard hasTwoSeparators(title) else { return title }
        let parts = title.components(separatedBy: " :: ")
        guard parts.count >= 3 else { return title }
        let kept = parts[parts.count - 2].trimmingCharacters(in: .whitespaces)
        return kept.isEmpty ? title : kept
    }

    /// Whether " :: " occurs at least twice, without making strings.
    private static func hasTwoSeparators(_ title: String) -> Bool {
        let separator: [UInt8] = [0x20, 0x3A, 0x3A, 0x20]
        var found = 0
        var matched = 0
        for byte in title.utf8 {
            if byte == separator[matched] {
                matched += 1
                if matched == separator.count {
                    found += 1
                    if found == 2 { return true }
                    matched = 0
                }
            } else {
                matched = byte == separator[0] ? 1 : 0
            }
        }
        return false
    }
}
