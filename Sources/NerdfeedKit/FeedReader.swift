import Depot
import Foundation

/// The ``XMLStreamHandler`` behind ``FeedParser``: a small state machine over
/// the element stack that fills one item at a time and hands finished items
/// over in batches.
///
/// Each item gets its identity here (``ParsedItem/id``): its `guid`, Atom `id`
/// or `rdf:about`, else its link, else ``FeedIdentity/contentHash(title:published:summary:)``.
/// What an Atom entry's `source` says (the feed it was copied from, with its
/// own `id`, title, authors and links) is not the entry's, and is ignored.
///
/// Used by one ``XMLStream`` on one thread for one document, then thrown away.
final class FeedReader: XMLStreamHandler {
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
        /// The RSS `guid`, trimmed, whether a permalink or not.
        var guid: String?
        /// The Atom `id`, trimmed.
        var atomID: String?
        var about: String?
        /// The format's own title, else `dc:title`, else `media:title` or `itunes:title`.
        var title = RankedField<String>()
        var authors = FeedAuthors()
        /// The summary, in this order: the format's own (RSS `description`,
        /// Atom `summary`), `dc:description`, the content (`content:encoded`,
        /// Atom `content`), `media:description`, `itunes:summary`, `itunes:subtitle`.
        var summary = RankedField<String>()
        /// When it was published: RSS's `pubDate`, Atom's `published` or 0.3's
        /// `issued` (rank 0), else 0.3's `created` (1), else Dublin Core's (2, 3).
        var published = RankedField<Date>()
        /// When it last changed: Atom's `updated` or 0.3's `modified`, else `dcterms:modified`.
        var updated = RankedField<Date>()
    }

    private let baseURL: URL
    private let removingBreadcrumbs: Bool
    private var stack: [Element] = []
    private var item: ItemDraft?
    private var text = ""
    /// The depth of an element whose children are markup to keep as text (Atom's `type="xhtml"`).
    private var markupDepth: Int?
    /// The depth of an Atom entry's `source` element while it is read: what it holds is not the entry's.
    private var sourceDepth: Int?
    /// The name and email of the Atom author element being read.
    private var personName: String?
    private var personEmail: String?
    private var feedAuthor: String?
    /// Whether the root is Atom's `feed`, whose entries may take the feed's author.
    private var isAtom = false

    /// Finished items not yet handed over.
    private var batch: [ParsedItem] = []
    /// Items waiting for a feed author named after them: from the first entry
    /// without an author on, in document order.
    private var waitingForAuthor: [ParsedItem] = []
    private let batchSize: Int
    /// The last base URL ``resolve(_:against:)`` saw, and its origin as text.
    private var originCache: (base: URL, origin: String)?
    private let deliver: ([ParsedItem]) throws -> Void

    /// The most items that wait for a feed author named after the entries.
    static let mostWaitingForAuthor = 10_000

    private(set) var sawFeedRoot = false
    /// The channel's (or Atom feed's) title, else its `dc:title`.
    private var channelTitle = RankedField<String>()
    var feedTitle: String? { channelTitle.value }
    private(set) var deliveredItems = 0
    private(set) var skippedItems = 0
    private(set) var failure: DepotError?
    /// What `deliver` threw; parsing stopped there.
    private(set) var deliveryError: (any Error)?

    init(baseURL: URL, removingBreadcrumbs: Bool, batchSize: Int, deliver: @escaping ([ParsedItem]) throws -> Void) {
        self.baseURL = baseURL
        self.removingBreadcrumbs = removingBreadcrumbs
        self.batchSize = max(1, batchSize)
        self.deliver = deliver
    }

    // MARK: - XMLStreamHandler

    func startElement(_ name: XMLStream.Name, attributes: [String: String], stream: XMLStream) {
        let (namespace, localName) = Self.resolve(name)
        if markupDepth == nil, let field = stack.last, Self.holdsText(namespace: field.namespace, name: field.name) {
            // An element inside a text field is markup in its text: Atom's xhtml
            // div or 0.3's xml mode, or tags a feed did not escape.
            markupDepth = stack.count
        }
        if markupDepth != nil {
            // Inside markup: keep the text; a tag separates words, unless inline.
            if !FeedText.isInline(localName) { text += " " }
            stack.append(Element(namespace: namespace, name: localName, attributes: [:], base: stack.last?.base ?? baseURL))
            return
        }
        var base = stack.last?.base ?? baseURL
        if let xmlBase = attributes["xml:base"] ?? attributes["base"], let url = URL(string: xmlBase, relativeTo: base) {
            base = url.absoluteURL
        }
        if stack.isEmpty {
            guard Self.isFeedRoot(namespace: namespace, name: localName) else {
                failure = FeedParseFailure.error("not an RSS or Atom feed: the root element is <\(name.qualified)>")
                stream.stop()
                return
            }
            sawFeedRoot = true
            isAtom = FeedNamespace.atom.contains(namespace)
        }
        stack.append(Element(namespace: namespace, name: localName, attributes: attributes, base: base))
        text = ""
        guard sourceDepth == nil else { return }
        let atomElement = FeedNamespace.atom.contains(namespace)
        if Self.isItem(namespace: namespace, name: localName) {
            item = ItemDraft()
            item?.about = (attributes["rdf:about"] ?? attributes["about"]).flatMap { resolve($0, against: base) }
        } else if item != nil, atomElement, localName == "source" {
            sourceDepth = stack.count
        } else if item != nil, atomElement, localName == "link" {
            noteAtomLink(attributes, base: base)
        } else if atomElement, localName == "author" {
            personName = nil
            personEmail = nil
        }
    }

    /// An entity the document does not declare: an HTML one joins the text as
    /// its character; any other is left out. RSS 0.91's Netscape DOCTYPE
    /// declares the HTML entities in a DTD that is never read, and its feeds
    /// write `&eacute;`.
    func undeclaredEntity(_ name: String) {
        if let scalar = FeedText.htmlEntities[name].flatMap(Unicode.Scalar.init) {
            text.unicodeScalars.append(scalar)
        }
    }

    func characters(_ string: String) {
        text += string
    }

    func endElement(_ name: XMLStream.Name, stream: XMLStream) {
        guard let element = stack.popLast() else { return }
        if let depth = markupDepth {
            if stack.count + 1 > depth {
                if !FeedText.isInline(element.name) { text += " " }
                return
            }
            markupDepth = nil
        }
        defer { text = "" }
        if let depth = sourceDepth {
            if stack.count + 1 == depth { sourceDepth = nil }  // the source element itself ended
            return
        }
        let parent = stack.last
        if Self.isItem(namespace: element.namespace, name: element.name) {
            finishItem(stream)
            return
        }
        if noteAtomPerson(element, parent: parent, stream: stream) { return }
        guard item != nil else {
            noteFeedLevel(element, parent: parent)
            return
        }
        noteItemField(element, parent: parent)
    }

    // MARK: - Elements

    private func noteFeedLevel(_ element: Element, parent: Element?) {
        guard let parent else { return }
        switch (element.namespace, element.name) {
        case (let ns, "title") where parent.name == "channel" && FeedNamespace.rss.contains(ns),
             (let ns, "title") where parent.name == "feed" && FeedNamespace.atom.contains(ns):
            channelTitle.offer(nonEmpty(textValue(of: element, html: FeedNamespace.rss.contains(ns))), rank: 0)
        case (FeedNamespace.dc, "title") where parent.name == "channel" || parent.name == "feed":
            channelTitle.offer(nonEmpty(FeedText.plainText(fromHTML: text)), rank: 1)
        default:
            break
        }
    }

    private func noteItemField(_ element: Element, parent: Element?) {
        let ns = element.namespace
        switch element.name {
        case "title" where FeedNamespace.rss.contains(ns) || FeedNamespace.atom.contains(ns):
            // RSS titles are often HTML-escaped twice ("AT&amp;amp;T"); Atom says what it holds.
            item?.title.offer(nonEmpty(textValue(of: element, html: FeedNamespace.rss.contains(ns))), rank: 0)
        case "title" where ns == FeedNamespace.dc:
            item?.title.offer(nonEmpty(FeedText.collapsingWhitespace(FeedText.decodingEntities(text))), rank: 1)
        case "title" where ns == FeedNamespace.media || ns == FeedNamespace.itunes:
            item?.title.offer(nonEmpty(FeedText.collapsingWhitespace(FeedText.decodingEntities(text))), rank: 2)
        case "link" where FeedNamespace.rss.contains(ns):
            if item?.link == nil { item?.link = resolve(text, against: element.base) }
        case "guid" where FeedNamespace.rss.contains(ns):
            // Any guid is the item's identity; only an absolute http(s) URL is
            // also its link: many feeds leave isPermaLink at its default for ids like "post-1".
            let guid = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if item?.guid == nil { item?.guid = nonEmpty(guid) }
            if element.attributes["isPermaLink"]?.lowercased() != "false", let url = URL(string: guid),
               url.scheme == "http" || url.scheme == "https", url.host != nil {
                item?.permalinkGUID = url.absoluteString
            }
        case "id" where FeedNamespace.atom.contains(ns):
            if item?.atomID == nil { item?.atomID = nonEmpty(text.trimmingCharacters(in: .whitespacesAndNewlines)) }
        case "author" where FeedNamespace.rss.contains(ns):
            item?.authors.add(FeedAuthors.rss(text), kind: .rss)
        case "creator" where ns == FeedNamespace.dc:
            item?.authors.add(FeedAuthors.rss(text), kind: .dublinCore)
        case "author" where ns == FeedNamespace.itunes:
            item?.authors.add(FeedAuthors.rss(text), kind: .podcast)
        case "description" where FeedNamespace.rss.contains(ns), "summary" where FeedNamespace.atom.contains(ns):
            item?.summary.offer(nonEmpty(textValue(of: element, html: true)), rank: 0)
        case "description" where ns == FeedNamespace.dc:
            // Plain text by Dublin Core's word, escaped HTML in the wild, as RSS's.
            item?.summary.offer(nonEmpty(FeedText.plainText(fromHTML: text)), rank: 1)
        case "encoded" where ns == FeedNamespace.content, "content" where FeedNamespace.atom.contains(ns):
            item?.summary.offer(nonEmpty(textValue(of: element, html: true)), rank: 2)
        case "description" where ns == FeedNamespace.media:
            item?.summary.offer(nonEmpty(textValue(of: element, html: element.attributes["type"] == "html")), rank: 3)
        case "summary" where ns == FeedNamespace.itunes:
            item?.summary.offer(nonEmpty(FeedText.plainText(fromHTML: text)), rank: 4)
        case "subtitle" where ns == FeedNamespace.itunes:
            item?.summary.offer(nonEmpty(FeedText.plainText(fromHTML: text)), rank: 5)
        case "pubDate" where FeedNamespace.rss.contains(ns), "published" where FeedNamespace.atom.contains(ns),
             "issued" where FeedNamespace.atom.contains(ns):
            item?.published.offer(FeedDate.parse(text), rank: 0)
        case "created" where FeedNamespace.atom.contains(ns):
            item?.published.offer(FeedDate.parse(text), rank: 1)
        case "date" where ns == FeedNamespace.dc, "issued" where ns == FeedNamespace.dcterms:
            item?.published.offer(FeedDate.parse(text), rank: 2)
        case "created" where ns == FeedNamespace.dcterms:
            item?.published.offer(FeedDate.parse(text), rank: 3)
        case "updated" where FeedNamespace.atom.contains(ns), "modified" where FeedNamespace.atom.contains(ns):
            item?.updated.offer(FeedDate.parse(text), rank: 0)
        case "modified" where ns == FeedNamespace.dcterms:
            item?.updated.offer(FeedDate.parse(text), rank: 1)
        default:
            break  // unknown extensions are ignored
        }
    }

    /// Atom's person constructs: an author's `name` and `email` come first, and
    /// at the end of the `author` element it becomes the entry's (another of
    /// its authors) or, at the top of the feed, the feed's (the first one).
    /// - Returns: Whether `element` was one of them.
    private func noteAtomPerson(_ element: Element, parent: Element?, stream: XMLStream) -> Bool {
        guard FeedNamespace.atom.contains(element.namespace) else { return false }
        let inAuthor = parent.map { $0.name == "author" && FeedNamespace.atom.contains($0.namespace) } ?? false
        switch element.name {
        case "name" where inAuthor:
            if personName == nil { personName = text }
        case "email" where inAuthor:
            if personEmail == nil { personEmail = text }
        case "author":
            let author = FeedAuthors.atom(name: personName, email: personEmail)
            personName = nil
            personEmail = nil
            if item != nil {
                item?.authors.add(author, kind: .atom)
            } else if stack.count == 1, feedAuthor == nil, let author {
                feedAuthor = author
                releaseWaiting(stream)
            }
        default:
            return false
        }
        return true
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

    private func finishItem(_ stream: XMLStream) {
        guard let draft = item else { return }
        item = nil
        guard deliveryError == nil else { return }  // stopped: the parser may still call back
        let link = draft.link ?? draft.alternateLink ?? draft.permalinkGUID ?? draft.about
        let summary = draft.summary.value
        // An item with nothing to show (no title, no summary, no link) is not kept.
        guard let fullTitle = draft.title.value ?? summary.map({ String($0.prefix(80)) }) ?? link else {
            skippedItems += 1
            return
        }
        let published = draft.published.value ?? draft.updated.value
        // The hash takes the title before breadcrumbs go: "Forum :: Topic :: Re: x" tells more posts apart than "Topic".
        let id = draft.guid ?? draft.atomID ?? draft.about ?? link
            ?? FeedIdentity.contentHash(title: fullTitle, published: published, summary: summary)
        let title = removingBreadcrumbs ? FeedText.removingBreadcrumbs(fullTitle) : fullTitle
        let parsed = ParsedItem(id: id, link: link, title: title, author: draft.authors.joined ?? feedAuthor, summary: summary, published: published)
        // An Atom entry without an author has the feed's, which may come after
        // the entries: from the first such entry on, items wait for it.
        if isAtom, feedAuthor == nil, parsed.author == nil || !waitingForAuthor.isEmpty {
            waitingForAuthor.append(parsed)
            if waitingForAuthor.count >= min(batchSize, Self.mostWaitingForAuthor) { releaseWaiting(stream) }
            return
        }
        batch.append(parsed)
        if batch.count >= batchSize { flush(stream) }
    }

    /// Moves the items waiting for the feed's author into the batch, with the
    /// author if it is known by now.
    private func releaseWaiting(_ stream: XMLStream?) {
        guard !waitingForAuthor.isEmpty else { return }
        for var waiting in waitingForAuthor {
            if waiting.author == nil { waiting.author = feedAuthor }
            batch.append(waiting)
            if batch.count >= batchSize { flush(stream) }
        }
        waitingForAuthor.removeAll(keepingCapacity: true)
    }

    /// Hands the batch over; stops the parser if the receiver throws.
    private func flush(_ stream: XMLStream?) {
        guard !batch.isEmpty, deliveryError == nil else { return }
        let items = batch
        batch.removeAll(keepingCapacity: true)
        do {
            try deliver(items)
            deliveredItems += items.count
        } catch {
            deliveryError = error
            stream?.stop()
        }
    }

    /// Call once the document is read: hands over what is left.
    func finish() throws {
        releaseWaiting(nil)
        flush(nil)
        if let deliveryError { throw deliveryError }
    }

    // MARK: - Text

    /// The element's text: as its type and mode say for Atom (see
    /// ``FeedText/atomText(_:type:mode:)``); else HTML when `html` (RSS, which
    /// never says), else plain.
    private func textValue(of element: Element, html: Bool) -> String {
        if FeedNamespace.atom.contains(element.namespace) {
            return FeedText.atomText(text, type: element.attributes["type"], mode: element.attributes["mode"])
        }
        return html ? FeedText.plainText(fromHTML: text) : FeedText.collapsingWhitespace(text)
    }

    private func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }

    /// An absolute URL string for `text` (trimmed) relative to `base`, or `nil` when empty or unusable.
    private func resolve(_ text: String, against base: URL) -> String? {
        if let resolved = LinkResolver.fastPath(text, against: base, origin: &originCache) { return resolved }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        guard let url = URL(string: trimmed, relativeTo: base)?.absoluteURL, url.scheme != nil else { return nil }
        return url.absoluteString
    }
}
