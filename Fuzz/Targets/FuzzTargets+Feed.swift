import Depot
import Foundation
import NerdfeedKit

extension FuzzTargets {
    /// The URL the fuzzed feeds claim to come from: relative links resolve against it.
    static let feedURL = URL(string: "https://forums.example.com/feeds/rss.php?f=24")!

    /// `FeedParser.parse(_:baseURL:)` on arbitrary bytes.
    ///
    /// Invariants: the parser returns or throws a `.decoding` error, nothing
    /// else; every item has a non-empty title, and its link, if it has one, is
    /// absolute (it reads back as a URL with a scheme); every date lies in the
    /// years 1 to 9999, which the cache can store.
    ///
    /// Documents on which Foundation's `XMLParser` traps
    /// (``KnownIssues/xmlParserTraps(on:)``) are fuzzed too: `FeedParser`
    /// drives libxml2 itself and must read or reject them.
    static func feed(_ data: Data) {
        let feed: ParsedFeed
        do {
            feed = try FeedParser.parse(data, baseURL: feedURL)
        } catch {
            check(error.code == .decoding, "feed", "threw \(error.code), not .decoding: \(error)")
            return
        }
        check(feed.skippedItems >= 0, "feed", "negative skipped count \(feed.skippedItems)")
        for (index, item) in feed.items.enumerated() {
            let link: String? = item.link
            check(!item.title.isEmpty, "feed", "item \(index) has an empty title (link \(link ?? "none"))")
            if let link {
                check(URL(string: link)?.scheme != nil, "feed", "item \(index)'s link is not absolute: \(link.debugDescription)")
            }
            if let published = item.published {
                check(CivilTime.storableRange.contains(published.timeIntervalSince1970), "feed",
                      "item \(index)'s date \(published.timeIntervalSince1970) is outside the years 1 to 9999")
            }
        }
    }
}
