import Depot
import Foundation

/// A feed as ``FeedParser`` read it: its title and its items, in document order.
public struct ParsedFeed: Sendable, Hashable {
    /// The channel's (or Atom feed's) title, as plain text; `nil` if it has none.
    public var title: String?
    /// The items, in the order the feed lists them: every one but the empty ones.
    public var items: [ParsedItem]
    /// How many items were left out because they had nothing to show: no
    /// title, no summary or content, and no link.
    public var skippedItems: Int

    /// Makes a parsed feed.
    public init(title: String?, items: [ParsedItem], skippedItems: Int = 0) {
        self.title = title
        self.items = items
        self.skippedItems = skippedItems
    }
}

/// One item of a feed (an RSS `item` or an Atom `entry`), cleaned for display.
///
/// Its ``id`` is what the cache knows it by within its feed, in this order:
/// - the RSS `guid` (whether a permalink or not), the Atom `id`, or RSS 1.0's `rdf:about`;
/// - else its link;
/// - else a hash of its title, date and summary (`hash:fnv1a64:` and 16 hex
///   digits, the same in every run and on every machine).
///
/// For example, an item that only a status page would write:
///
/// ```swift
/// let item = ParsedItem(title: "Service restored", published: restoredAt)
/// item.link   // nil
/// item.id     // "hash:fnv1a64:…": the same whenever the feed lists it again
/// ```
public struct ParsedItem: Sendable, Hashable {
    /// The item's identity within its feed: its `guid`, Atom `id` or
    /// `rdf:about`, else its link, else a hash of its title, date and summary.
    public var id: String
    /// The item's absolute link, or `nil` when the feed gives none.
    public var link: String?
    /// The title: whitespace collapsed, entities decoded, markup removed, forum breadcrumbs removed.
    /// An item without one is titled by its summary's first 80 characters, or by its link.
    public var title: String
    /// The author as the feed gives it, `Name (email)` when it gives both;
    /// several authors are joined with `", "`.
    public var author: String?
    /// The summary (or, failing that, the content) as plain text, if any.
    public var summary: String?
    /// When the item was published (or, failing that, last updated), if the feed says so in a readable form.
    public var published: Date?

    /// Makes a parsed item.
    ///
    /// - Parameters:
    ///   - id: The item's identity within its feed; `nil` takes `link`, or
    ///     without one a hash of `title`, `published` and `summary`.
    ///   - link: The item's absolute link, if it has one.
    ///   - title: The title.
    ///   - author: The author.
    ///   - summary: The summary as plain text.
    ///   - published: The publication date.
    public init(id: String? = nil, link: String? = nil, title: String, author: String? = nil, summary: String? = nil, published: Date? = nil) {
        self.id = id ?? link ?? FeedIdentity.contentHash(title: title, published: published, summary: summary)
        self.link = link
        self.title = title
        self.author = author
        self.summary = summary
        self.published = published
    }
}

/// Reads RSS 2.0, RSS 1.0 (RDF), RSS 0.9x and Atom 0.3 and 1.0 feeds with
/// libxml2's streaming parser, into plain values ready to be merged into the cache.
///
/// Parsing is kept apart from storing: the parser knows nothing of the database.
/// ``parse(_:baseURL:removingBreadcrumbs:)`` returns the whole feed;
/// ``parse(_:baseURL:removingBreadcrumbs:batchSize:_:)`` hands the items over in
/// batches as it meets them, so a feed of a million items never has to be held
/// as values all at once (``FetchForumFeed`` merges each batch as it comes).
///
/// What it copes with: titles and summaries in every encoding feeds use (RSS
/// text with entities or markup, escaped or written as elements; Atom
/// `type="text"`, `"html"` and `"xhtml"`; Atom 0.3's `mode`, `base64` among
/// them; CDATA; and the HTML entities RSS 0.91's DTD declares written bare),
/// all turned into plain text; namespaced extensions (`dc:title`,
/// `dc:description`, `dc:creator`, `dc:date`, `content:encoded`,
/// `media:title`, `media:description`, `itunes:author`, `itunes:summary`;
/// unknown ones are ignored), where the format's own element wins over an
/// extension's whatever their order; RFC 822 and ISO 8601 / W3C-DTF dates in
/// their loose real-world forms (unreadable dates become `nil`); links
/// relative to the feed's URL or an `xml:base`; items whose only link is a
/// permalink `guid` or an `rdf:about`.
/// Items without a link are kept: see ``ParsedItem/id`` for how each is known.
/// Only items with nothing to show (no title, summary or link) are skipped and
/// counted in ``ParsedFeed/skippedItems``. Documents of any size up to the
/// controller's body limit are read: the bytes go to libxml2 in small chunks, so
/// its 10,000,000-byte limit on one chunk never applies, while its limits on
/// entity expansion (billion laughs, quadratic blowup) still do. External
/// entities and DTDs are never loaded.
///
/// For example:
///
/// ```swift
/// let feed = try FeedParser.parse(data, baseURL: URL(string: "https://forums.example.com/rss")!)
/// for item in feed.items { print(item.published ?? "undated", item.title, item.link ?? "no link") }
/// ```
public struct FeedParser {
    /// How many items ``parse(_:baseURL:removingBreadcrumbs:batchSize:_:)`` hands over at a time by default.
    public static let defaultBatchSize = 1_000

    /// What a streamed parse saw, besides the items it handed over.
    public struct Summary: Sendable, Hashable {
        /// The channel's (or Atom feed's) title, whitespace collapsed; `nil` if it has none.
        public var title: String?
        /// How many items were handed over.
        public var items: Int
        /// How many items were left out because they had nothing to show (no title, summary or link).
        public var skippedItems: Int
    }

    /// Parses a feed document.
    ///
    /// - Parameters:
    ///   - data: The document's bytes, in the encoding its XML declaration names (UTF-8 by default).
    ///   - baseURL: The URL the feed was fetched from; relative links resolve against it.
    ///   - removingBreadcrumbs: Whether to trim forum breadcrumbs from titles
    ///     (`"Forum :: Topic :: Reply"` → `"Topic"`). Default: `true`, as the Nerdfeed forum needs.
    /// - Returns: The feed's title and its items.
    /// - Throws: `.decoding` when the document is not well-formed XML (with the
    ///   line and column), is empty or truncated, or is not an RSS or Atom feed.
    public static func parse(_ data: Data, baseURL: URL, removingBreadcrumbs: Bool = true) throws(DepotError) -> ParsedFeed {
        var items: [ParsedItem] = []
        do {
            let summary = try parse(data, baseURL: baseURL, removingBreadcrumbs: removingBreadcrumbs, batchSize: .max) { items += $0 }
            return ParsedFeed(title: summary.title, items: items, skippedItems: summary.skippedItems)
        } catch let error as DepotError {
            throw error
        } catch {
            // Collecting cannot throw: whatever comes here is the parser's.
            throw DepotError(.decoding, underlying: error)
        }
    }

    /// Parses a feed document, handing its items to `body` in batches of up to
    /// `batchSize`, in document order, as the parser meets them.
    ///
    /// An Atom entry without an author takes the feed's. When the feed names its
    /// author only after its entries, the entries read so far wait for it, up to
    /// `batchSize` of them (and never more than 10,000); past that they go on
    /// without it.
    ///
    /// For example, counting the items of a feed of any size in bounded memory:
    ///
    /// ```swift
    /// var count = 0
    /// let summary = try FeedParser.parse(data, baseURL: feedURL) { batch in count += batch.count }
    /// print(summary.title ?? "untitled", count, "items")
    /// ```
    ///
    /// - Parameters:
    ///   - data: The document's bytes.
    ///   - baseURL: The URL the feed was fetched from; relative links resolve against it.
    ///   - removingBreadcrumbs: Whether to trim forum breadcrumbs from titles.
    ///   - batchSize: The most items handed over at a time (at least 1).
    ///   - body: Takes each batch. If it throws, parsing stops and the error is rethrown.
    /// - Returns: The feed's title and how many items were handed over or skipped.
    /// - Throws: `.decoding` as ``parse(_:baseURL:removingBreadcrumbs:)`` does, or what `body` threw.
    ///   Batches handed over before a failure are not taken back: write them in
    ///   a transaction that the failure rolls back.
    @discardableResult
    public static func parse(
        _ data: Data,
        baseURL: URL,
        removingBreadcrumbs: Bool = true,
        batchSize: Int = defaultBatchSize,
        _ body: ([ParsedItem]) throws -> Void
    ) throws -> Summary {
        guard !data.isEmpty else { throw FeedParseFailure.error("the feed is empty") }
        try FeedEncoding.check(data)
        return try withoutActuallyEscaping(body) { body in
            let reader = FeedReader(baseURL: baseURL, removingBreadcrumbs: removingBreadcrumbs, batchSize: batchSize, deliver: body)
            let failure = XMLStream(handler: reader).parse(data)
            return try summary(of: reader, failure: failure)
        }
    }

    /// What a read that has ended comes to: its summary, or why it failed.
    static func summary(of reader: FeedReader, failure: XMLStream.Failure?) throws -> Summary {
        try throwIfFailed(reader, failure)
        guard reader.sawFeedRoot else {
            throw FeedParseFailure.error("not an RSS or Atom feed: no root element")
        }
        try reader.finish()
        return Summary(title: reader.feedTitle, items: reader.deliveredItems, skippedItems: reader.skippedItems)
    }

    /// Throws what stopped a read, if anything did: the receiver's error, the
    /// reader's, or libxml2's.
    static func throwIfFailed(_ reader: FeedReader, _ failure: XMLStream.Failure?) throws {
        if let stopped = reader.deliveryError { throw stopped }
        if let failure = reader.failure { throw failure }
        if let failure {
            // libxml2's words ("EntityRef: expecting ';'") and number (68 for a bare "&", 26 for an
            // undeclared entity, 201 for an undeclared namespace prefix). The words can quote the
            // document (an entity's name): they are cut short, and terminals get them sanitized.
            let words = failure.message.isEmpty ? "" : ": " + (failure.message.count > 120 ? failure.message.prefix(119) + "…" : failure.message)
            throw FeedParseFailure.error("malformed XML at line \(failure.line), column \(failure.column)\(words) (libxml2 error \(failure.code))", xmlError: failure)
        }
    }
}

/// Why a feed could not be read, as the underlying error of a `.decoding`
/// ``Depot/DepotError``: DepotError prints its underlying error, so the line and
/// column reach the sync status and the logs.
struct FeedParseFailure: Error, CustomStringConvertible {
    /// What was wrong, with the line and column when the XML was malformed.
    var message: String
    /// The XML parser's own error, if it reported one.
    var xmlError: (any Error)?

    var description: String { message }

    /// A `.decoding` error whose detail and underlying error say `message`.
    static func error(_ message: String, xmlError: (any Error)? = nil) -> DepotError {
        DepotError(.decoding, detail: message, underlying: FeedParseFailure(message: message, xmlError: xmlError))
    }
}
