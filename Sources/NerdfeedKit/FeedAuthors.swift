import Foundation

/// An item's authors as the feed gives them, in one form whatever the format:
/// `Name (email)` when the feed gives both, else the name, else the email.
///
/// The form is the one RSS 2.0's `author` and `managingEditor` use, turned
/// name first, as a reader looks for the person before the address:
/// - Atom's `<name>Joe</name><email>joe@example.com</email>` gives `Joe (joe@example.com)`;
/// - RSS 2.0's `joe@example.com (Joe)`, the same person, gives the same;
/// - so does mail's `Joe <joe@example.com>` (or `"Joe" <joe@example.com>`);
/// - anything else (`Joe`, `joe@example.com`, `Joe (the editor)`, a
///   `dc:creator` such as `The Editors`) is kept as given, whitespace collapsed.
///
/// An item may name several authors, in elements of different kinds. One kind
/// wins (an item with both `<author>` and `dc:creator` usually names one
/// person twice): the format's own (RSS's or Atom's `author`) over
/// `dc:creator` over `itunes:author`, whatever their order. The authors of
/// that kind are joined with `", "`, at most ``mostAuthors`` of them.
///
/// For example:
///
/// ```swift
/// var authors = FeedAuthors()
/// authors.add("Joe", kind: .dublinCore)
/// authors.add(FeedAuthors.rss("joe@example.com (Joe)"), kind: .rss)   // the format's own: it wins
/// authors.joined                                                       // "Joe (joe@example.com)"
/// ```
struct FeedAuthors {
    /// The element an author came from.
    enum Kind {
        case atom, rss, dublinCore, podcast

        /// How the kind ranks, 0 the best: the format's own, then Dublin Core's, then iTunes'.
        var rank: Int {
            switch self {
            case .atom, .rss: 0
            case .dublinCore: 1
            case .podcast: 2
            }
        }
    }

    /// The most authors kept for one item.
    static let mostAuthors = 16

    private var kind: Kind?
    private var names: [String] = []

    /// Adds an author found in an element of `kind`; `nil` or empty adds nothing.
    mutating func add(_ author: String?, kind: Kind) {
        guard let author, !author.isEmpty else { return }
        // The first author of a better kind replaces those of a worse one.
        if self.kind.map({ kind.rank < $0.rank }) ?? true {
            self.kind = kind
            names.removeAll()
        }
        guard self.kind == kind, names.count < Self.mostAuthors, !names.contains(author) else { return }
        names.append(author)
    }

    /// The authors joined with `", "`, or `nil` if there are none.
    var joined: String? {
        names.isEmpty ? nil : names.joined(separator: ", ")
    }

    /// `Name (email)` from an Atom person's name and email; either alone as it is.
    static func atom(name: String?, email: String?) -> String? {
        let name = name.map(FeedText.collapsingWhitespace).flatMap { $0.isEmpty ? nil : $0 }
        let email = email.map(FeedText.collapsingWhitespace).flatMap { $0.isEmpty ? nil : $0 }
        switch (name, email) {
        case let (name?, email?): return "\(name) (\(email))"
        case let (name?, nil): return name
        case let (nil, email?): return email
        case (nil, nil): return nil
        }
    }

    /// An RSS author (`author`, `dc:creator`, `itunes:author`): RSS 2.0's
    /// `email (Name)` and mail's `Name <email>` become `Name (email)`; anything
    /// else stays as given.
    static func rss(_ text: String) -> String {
        let text = FeedText.collapsingWhitespace(text)
        if text.hasSuffix(")"), let open = text.firstIndex(of: "(") {
            // Only an address before the parentheses: "Joe (editor)" is a name with a remark.
            let email = text[..<open].trimmingCharacters(in: .whitespaces)
            let name = text[text.index(after: open)..<text.index(before: text.endIndex)].trimmingCharacters(in: .whitespaces)
            return isAddress(email) && !name.isEmpty ? "\(name) (\(email))" : text
        }
        if text.hasSuffix(">"), let open = text.lastIndex(of: "<") {
            let email = text[text.index(after: open)..<text.index(before: text.endIndex)].trimmingCharacters(in: .whitespaces)
            let name = text[..<open].trimmingCharacters(in: CharacterSet.whitespaces.union(["\""]))
            return isAddress(email) ? atom(name: name, email: email) ?? text : text
        }
        return text
    }

    /// Whether `text` looks like a mail address: an `@` and no space.
    private static func isAddress(_ text: String) -> Bool {
        text.contains("@") && !text.contains(" ")
    }
}
