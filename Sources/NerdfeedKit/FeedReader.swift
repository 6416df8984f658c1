import Depot
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// The namespaces ``FeedReader`` understands.
enum FeedNamespace {
    static let rss090 = "http://my.netscape.com/rdf/simple/0.9/"
    static let rss10 = "http://purl.org/rss/1.0/"
    static let rss20 = "http://backend.userland.com/rss2"
    static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    static let atom10 = "http://www.w3.org/2005/Atom"
    static let atom03 = "http://purl.org/atom/ns#"
    static let dc = "http://purl.org/dc/elements/1.1/"
    static let dcterms = "http://purl.org/dc/terms/"
    static let content = "http://purl.org/rss/1.0/modules/content/"
    static let media = "http://search.yahoo.com/mrss/"
    static let xml = "http://www.w3.org/XML/1998/namespace"

    /// Plain RSS elements: no namespace (0.91 to 2.0), or RSS 0.90's and 1.0's.
    static let rss: Set<String> = ["", rss090, rss10, rss20]
    static let atom: Set<String> = [atom10, atom03]

    /// The usual prefixes, for feeds that use one without declaring it.
    static let wellKnownPrefixes: [String: String] = [
        "dc": dc, "dcterms": dcterms, "content": content, "media": media, "atom": atom10, "rdf": rdf,
    ]
}

/// The `XMLParserDelegate` behind ``FeedParser``: a small state machine over
/// the element stack that fills one item at a time and hands finished items
/// over in batches.
///
/// Used by one `XMLParser` on one thread for one document, then thrown away.
final class FeedReader: NSObject, XMLParserDelegate {
    private struct Element {
        var namespace: String
        var name: String
        var attributes: [String: String]
        /// The base URL in scope (the feed's URL, or the nearest `xml:base`).
        var base: URL
    }

    /// What is known about the item being read.
    private struct ItemDraft {
        var link: String?
        var alternateLink: String?
        var alternateIsHTML = false
        var permalinkGUID: String?
        var about: String?
        var title: String?
        var fallbackTitle: String?
        var author: String?
        var summary: String?
        var content: String?
        var mediaDescription: String?
        var published: Date?
        var updated: Date?
    }

    private let baseURL: URL
    private let removingBreadcrumbs: Bool
    private var stack: [Element] = []
    private var item: ItemDraft?
    private var text = ""
    /// The depth of an element whose children are markup to keep as text (Atom's `type="xhtml"`).
    private var markupDepth: Int?
    private var feedAuthor: String?
    /// Whether the root is Atom's `feed`, whose entries may take the feed's author.
    private var isAtom = false

    /// Finished items not yet handed over.
    private var batch: [ParsedItem] = []
    /// Items waiting for a feed author named after them: from the first entry
    /// without an author on, in document order.
    private var waitingForAuthor: [ParsedItem] = []
    private let batchSize: Int
    private let deliver: ([ParsedItem]) throws -> Void

    /// The most items that wait for a feed author named after the entries.
    static let mostWaitingForAuthor = 10_000

    private(set) var sawFeedRoot = false
    private(set) var feedTitle: String?
    private(set) var deliveredItems = 0
    private(set) var skippedItems = 0
    private(set) var failure: DepotError?
    /// What `deliver` threw; parsing stopped there.
    private(set) var deliveryError: (any Error)?
    /// The first error the XML parser reported, and where.
    private(set) var firstError: (error: any Error, line: Int, column: Int)?

    init(baseURL: URL, removingBreadcrumbs: Bool, batchSize: Int, deliver: @escaping ([ParsedItem]) throws -> Void) {
        self.baseURL = baseURL
        self.removingBreadcrumbs = removingBreadcrumbs
        self.batchSize = max(1, batchSize)
        self.deliver = deliver
    }

    // MARK: - XMLParserDelegate

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        let (namespace, localName) = Self.resolve(name, namespaceURI: namespaceURI, qualifiedName: qualifiedName)
        if markupDepth != nil {
            // Inside xhtml content: keep the text, let tags separate words.
            text += " "
            stack.append(Element(namespace: namespace, name: localName, attributes: [:], base: stack.last?.base ?? baseURL))
            return
        }
        var base = stack.last?.base ?? baseURL
        if let xmlBase = attributes["xml:base"] ?? attributes["base"], let url = URL(string: xmlBase, relativeTo: base) {
            base = url.absoluteURL
        }
        if stack.isEmpty {
            guard isFeedRoot(namespace: namespace, name: localName) else {
                failure = FeedParseFailure.error("not an RSS or Atom feed: the root element is <\(qualifiedName ?? name)>")
                parser.abortParsing()
                return
            }
            sawFeedRoot = true
            isAtom = FeedNamespace.atom.contains(namespace)
        }
        stack.append(Element(namespace: namespace, name: localName, attributes: attributes, base: base))
        text = ""
        if isItem(namespace: namespace, name: localName) {
            item = ItemDraft()
            item?.about = (attributes["rdf:about"] ?? attributes["about"]).flatMap { resolve($0, against: base) }
        } else if item != nil, FeedNamespace.atom.contains(namespace), localName == "link" {
            noteAtomLink(attributes, base: base)
        } else if ["content", "summary", "title"].contains(localName), FeedNamespace.atom.contains(namespace),
                  attributes["type"] == "xhtml" || attributes["mode"] == "xml" {
            markupDepth = stack.count
        }
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        if firstError == nil { firstError = (parseError, parser.lineNumber, parser.columnNumber) }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        text += string
    }

    func parser(_ parser: XMLParser, foundCDATA block: Data) {
        text += String(decoding: block, as: UTF8.self)
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        guard let element = stack.popLast() else { return }
        if let depth = markupDepth {
            if stack.count + 1 > depth {
                text += " "
                return
            }
            markupDepth = nil
        }
        defer { text = "" }
        let parent = stack.last
        if isItem(namespace: element.namespace, name: element.name) {
            finishItem(parser)
            return
        }
        guard item != nil else {
            noteFeedLevel(element, parent: parent, parser: parser)
            return
        }
        noteItemField(element, parent: parent)
    }

    // MARK: - Elements

    private func isFeedRoot(namespace: String, name: String) -> Bool {
        (name == "rss" && FeedNamespace.rss.contains(namespace))
            || (name == "RDF" && namespace == FeedNamespace.rdf)
            || (name == "feed" && FeedNamespace.atom.contains(namespace))
    }

    private func isItem(namespace: String, name: String) -> Bool {
        (name == "item" && FeedNamespace.rss.contains(namespace)) || (name == "entry" && FeedNamespace.atom.contains(namespace))
    }

    private func noteFeedLevel(_ element: Element, parent: Element?, parser: XMLParser) {
        guard let parent else { return }
        switch (element.namespace, element.name) {
        case (let ns, "title") where parent.name == "channel" && FeedNamespace.rss.contains(ns),
             (let ns, "title") where parent.name == "feed" && FeedNamespace.atom.contains(ns):
            feedTitle = nonEmpty(textValue(of: element, html: false))
        case (let ns, "name") where parent.name == "author" && FeedNamespace.atom.contains(ns) && stack.count == 2:
            feedAuthor = nonEmpty(FeedText.collapsingWhitespace(text))
            if feedAuthor != nil { releaseWaiting(parser) }
        default:
            break
        }
    }

    private func noteItemField(_ element: Element, parent: Element?) {
        let ns = element.namespace
        switch element.name {
        case "title" where FeedNamespace.rss.contains(ns) || FeedNamespace.atom.contains(ns):
            // RSS titles are often HTML-escaped twice ("AT&amp;amp;T"); Atom says what it holds.
            item?.title = nonEmpty(textValue(of: element, html: FeedNamespace.rss.contains(ns)))
        case "title" where ns == FeedNamespace.dc || ns == FeedNamespace.media:
            if item?.fallbackTitle == nil { item?.fallbackTitle = nonEmpty(FeedText.collapsingWhitespace(FeedText.decodingEntities(text))) }
        case "link" where FeedNamespace.rss.contains(ns):
            if item?.link == nil { item?.link = resolve(text, against: element.base) }
        case "guid" where FeedNamespace.rss.contains(ns):
            // Only an absolute http(s) URL: many feeds leave isPermaLink at its default for ids like "post-1".
            let guid = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if element.attributes["isPermaLink"]?.lowercased() != "false", let url = URL(string: guid),
               url.scheme == "http" || url.scheme == "https", url.host != nil {
                item?.permalinkGUID = url.absoluteString
            }
        case "creator" where ns == FeedNamespace.dc:
            if item?.author == nil { item?.author = nonEmpty(FeedText.collapsingWhitespace(text)) }
        case "author" where FeedNamespace.rss.contains(ns):
            if item?.author == nil { item?.author = nonEmpty(Self.nameFromEmailAddress(FeedText.collapsingWhitespace(text))) }
        case "name" where FeedNamespace.atom.contains(ns) && parent?.name == "author",
             "email" where FeedNamespace.atom.contains(ns) && parent?.name == "author":
            // The name wins over the email, whichever comes first.
            if item?.author == nil || element.name == "name" { item?.author = nonEmpty(FeedText.collapsingWhitespace(text)) ?? item?.author }
        case "description" where FeedNamespace.rss.contains(ns), "summary" where FeedNamespace.atom.contains(ns):
            if item?.summary == nil { item?.summary = nonEmpty(textValue(of: element, html: true)) }
        case "encoded" where ns == FeedNamespace.content, "content" where FeedNamespace.atom.contains(ns):
            if item?.content == nil, element.attributes["mode"] != "base64" { item?.content = nonEmpty(textValue(of: element, html: true)) }
        case "description" where ns == FeedNamespace.media:
            if item?.mediaDescription == nil { item?.mediaDescription = nonEmpty(textValue(of: element, html: element.attributes["type"] == "html")) }
        case "pubDate" where FeedNamespace.rss.contains(ns), "date" where ns == FeedNamespace.dc,
             "published" where FeedNamespace.atom.contains(ns), "issued" where FeedNamespace.atom.contains(ns),
             "created" where FeedNamespace.atom.contains(ns), "issued" where ns == FeedNamespace.dcterms,
             "created" where ns == FeedNamespace.dcterms:
            if item?.published == nil { item?.published = FeedDate.parse(text) }
        case "updated" where FeedNamespace.atom.contains(ns), "modified" where FeedNamespace.atom.contains(ns),
             "modified" where ns == FeedNamespace.dcterms:
            if item?.updated == nil { item?.updated = FeedDate.parse(text) }
        default:
            break  // unknown extensions are ignored
        }
    }

    /// Atom links: the first `alternate` (the default `rel`) wins, an HTML one over others.
    private func noteAtomLink(_ attributes: [String: String], base: URL) {
        let rel = attributes["rel"] ?? "alternate"
        guard rel == "alternate" || rel == FeedNamespace.atom10 + "alternate",
              let href = attributes["href"], let link = resolve(href, against: base) else { return }
        let isHTML = attributes["type"].map { $0.hasPrefix("text/html") || $0.hasPrefix("application/xhtml") } ?? true
        if item?.alternateLink == nil || (isHTML && item?.alternateIsHTML == false) {
            item?.alternateLink = link
            item?.alternateIsHTML = isHTML
        }
    }

    private func finishItem(_ parser: XMLParser) {
        guard let draft = item else { return }
        item = nil
        guard deliveryError == nil else { return }  // stopped: the parser may still call back
        guard let link = draft.link ?? draft.alternateLink ?? draft.permalinkGUID ?? draft.about else {
            skippedItems += 1
            return
        }
        let summary = draft.summary ?? draft.content ?? draft.mediaDescription
        var title = draft.title ?? draft.fallbackTitle ?? summary.map { String($0.prefix(80)) } ?? link
        if removingBreadcrumbs { title = FeedText.removingBreadcrumbs(title) }
        let parsed = ParsedItem(link: link, title: title, author: draft.author ?? feedAuthor, summary: summary, published: draft.published ?? draft.updated)
        // An Atom entry without an author has the feed's, which may come after
        // the entries: from the first such entry on, items wait for it.
        if isAtom, feedAuthor == nil, parsed.author == nil || !waitingForAuthor.isEmpty {
            waitingForAuthor.append(parsed)
            if waitingForAuthor.count >= min(batchSize, Self.mostWaitingForAuthor) { releaseWaiting(parser) }
            return
        }
        batch.append(parsed)
        if batch.count >= batchSize { flush(parser) }
    }

    /// Moves the items waiting for the feed's author into the batch, with the
    /// author if it is known by now.
    private func releaseWaiting(_ parser: XMLParser?) {
        guard !waitingForAuthor.isEmpty else { return }
        for var waiting in waitingForAuthor {
            if waiting.author == nil { waiting.author = feedAuthor }
            batch.append(waiting)
            if batch.count >= batchSize { flush(parser) }
        }
        waitingForAuthor.removeAll(keepingCapacity: true)
    }

    /// Hands the batch over; stops the parser if the receiver throws.
    private func flush(_ parser: XMLParser?) {
        guard !batch.isEmpty, deliveryError == nil else { return }
        let items = batch
        batch.removeAll(keepingCapacity: true)
        do {
            try deliver(items)
            deliveredItems += items.count
        } catch {
            deliveryError = error
            parser?.abortParsing()
        }
    }

    /// Call once the document is read: hands over what is left.
    func finish() throws {
        releaseWaiting(nil)
        flush(nil)
        if let deliveryError { throw deliveryError }
    }

    // MARK: - Text

    /// The element's text: HTML when the feed says so (or RSS, which never says), else plain.
    private func textValue(of element: Element, html: Bool) -> String {
        let type = (element.attributes["type"] ?? "").lowercased()
        let isHTML: Bool
        if FeedNamespace.atom.contains(element.namespace) {
            // Atom 1.0: text | html | xhtml; Atom 0.3: a MIME type and mode="escaped".
            isHTML = type == "html" || type.hasPrefix("text/html") || element.attributes["mode"] == "escaped"
        } else {
            isHTML = html
        }
        return isHTML ? FeedText.plainText(fromHTML: text) : FeedText.collapsingWhitespace(text)
    }

    private func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }

    /// An absolute URL string for `text` (trimmed) relative to `base`, or `nil` when empty or unusable.
    private func resolve(_ text: String, against base: URL) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        guard let url = URL(string: trimmed, relativeTo: base)?.absoluteURL, url.scheme != nil else { return nil }
        return url.absoluteString
    }

    /// RSS 2.0's `author` is an email address, often with the name in parentheses:
    /// `joe@example.com (Joe Bloggs)` gives `Joe Bloggs`.
    static func nameFromEmailAddress(_ text: String) -> String {
        if let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")"), open < close {
            let name = text[text.index(after: open)..<close].trimmingCharacters(in: .whitespaces)
            if !name.isEmpty { return name }
        }
        return text
    }

    /// The namespace and local name of an element, also when the namespace was
    /// not declared (`dc:creator` with no `xmlns:dc` still means Dublin Core).
    static func resolve(_ name: String, namespaceURI: String?, qualifiedName: String?) -> (namespace: String, name: String) {
        // Some XMLParser versions pass the qualified name as the element name.
        let local = name.split(separator: ":").last.map(String.init) ?? name
        if let namespaceURI, !namespaceURI.isEmpty { return (namespaceURI, local) }
        let qualified = qualifiedName ?? name
        if let colon = qualified.firstIndex(of: ":") {
            let prefix = String(qualified[..<colon])
            return (FeedNamespace.wellKnownPrefixes[prefix] ?? "undeclared:" + prefix, local)
        }
        return ("", local)
    }
}
