import Foundation
import Seeded

/// The forum the Nerdfeed routes publish: posts generated from a seed, with a
/// new one every `postInterval` of server time.
struct ForumFeed: Sendable {
    struct Post: Sendable, Hashable {
        var id: Int
        var title: String
        var author: String
        var published: Date
        var link: String
        var body: String
    }

    let seed: UInt64
    let initialPosts: Int
    let postInterval: Duration
    let epoch: Date

    /// The posts visible `elapsed` after the server started, newest first.
    func posts(elapsed: Duration, limit: Int = 50) -> [Post] {
        let intervalSeconds = max(postInterval.components.seconds, 1)
        let extra = Int(elapsed.components.seconds / intervalSeconds)
        let count = initialPosts + max(0, extra)
        let first = max(0, count - limit)
        return (first..<count).reversed().map(post)
    }

    /// Post number `index` (0-based), the same for a given seed every time.
    func post(_ index: Int) -> Post {
        var random = SplitMix64(seed: seed &+ UInt64(index) &* 0x9E37_79B9)
        let chapter = Self.chapters[Int(random.next() % UInt64(Self.chapters.count))]
        let topic = Self.topics[Int(random.next() % UInt64(Self.topics.count))]
        let reply = random.next() % 3 == 0 ? "" : "Re: "
        let author = Self.authors[Int(random.next() % UInt64(Self.authors.count))]
        // Older posts are further back: one every postInterval before the epoch, newest at the top.
        let published = epoch.addingTimeInterval(Double(index - initialPosts) * Double(max(postInterval.components.seconds, 1)))
        let body = "<p>\(author) wrote about <b>\(topic)</b> &amp; asked: does it \"just work\"? Chapter \(chapter.number) says &lt;see page \(100 + index)&gt;.</p>"
        return Post(
            id: index + 1,
            // Forum :: topic :: where: Nerdfeed keeps the middle part, as the original did.
            title: "iOS Programming :: \(reply)\(topic) :: Chapter \(chapter.number), \(chapter.name)",
            author: author,
            published: published,
            link: "/forum/posts/\(index + 1)",
            body: body
        )
    }

    static let chapters: [(number: Int, name: String)] = [
        (7, "View Controllers"), (12, "Camera"), (19, "Subclassing UITableViewCell"),
        (24, "Web Services"), (27, "Blocks"), (28, "Stores"), (29, "Core Data"), (31, "Localization"),
    ]
    static let topics = [
        "fetch twice?", "cache not updating", "completion never called", "NSFetchedResultsController and sections",
        "pull to refresh crashes", "merging items by link", "top songs older than 5 minutes", "offline mode",
        "Silver challenge: read state", "Gold challenge: sort by date",
    ]
    static let authors = ["joeconway", "aaronh", "kmackenzie", "mikew", "bnr_student", "swiftling", "feedreader42"]
}

/// Renders the forum as RSS 2.0 and Atom 1.0.
enum FeedRenderer {
    static func rss(_ posts: [ForumFeed.Post], baseURL: String, updated: Date) -> String {
        var xml = """
        <?xml version="1.0" encoding="UTF-8"?>
        <rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:content="http://purl.org/rss/1.0/modules/content/">
        <channel>
        <title>Big Nerd Ranch Forums &amp; Friends</title>
        <link>\(baseURL)/forum</link>
        <description>Posts from the last day</description>
        <lastBuildDate>\(rfc822(updated))</lastBuildDate>

        """
        for post in posts {
            xml += """
            <item>
            <title>\(escape(post.title))</title>
            <link>\(baseURL)\(post.link)</link>
            <guid isPermaLink="false">post-\(post.id)</guid>
            <dc:creator>\(escape(post.author))</dc:creator>
            <pubDate>\(rfc822(post.published))</pubDate>
            <description><![CDATA[\(post.body)]]></description>
            </item>

            """
        }
        xml += "</channel>\n</rss>\n"
        return xml
    }

    static func atom(_ posts: [ForumFeed.Post], baseURL: String, updated: Date) -> String {
        var xml = """
        <?xml version="1.0" encoding="UTF-8"?>
        <feed xmlns="http://www.w3.org/2005/Atom">
        <title>Big Nerd Ranch Forums &amp; Friends</title>
        <id>\(baseURL)/forum</id>
        <link href="\(baseURL)/forum"/>
        <updated>\(rfc3339(updated))</updated>

        """
        for post in posts {
            xml += """
            <entry>
            <title type="text">\(escape(post.title))</title>
            <id>\(baseURL)\(post.link)</id>
            <link href="\(post.link)"/>
            <author><name>\(escape(post.author))</name></author>
            <updated>\(rfc3339(post.published))</updated>
            <content type="html">\(escape(post.body))</content>
            </entry>

            """
        }
        xml += "</feed>\n"
        return xml
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;")
            .replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    static func rfc822(_ date: Date) -> String {
        date.formatted(Date.VerbatimFormatStyle(format: "\(weekday: .abbreviated), \(day: .twoDigits) \(month: .abbreviated) \(year: .defaultDigits) \(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits):\(second: .twoDigits) GMT", locale: Locale(identifier: "en_US_POSIX"), timeZone: .gmt, calendar: Calendar(identifier: .gregorian)))
    }

    static func rfc3339(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
