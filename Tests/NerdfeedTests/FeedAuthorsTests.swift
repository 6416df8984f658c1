import Foundation
import Testing
@testable import NerdfeedKit

/// Authors appear as the feed gives them, `Name (email)` when it gives both.
@Suite struct FeedAuthorsTests {
    /// An RSS item's author elements, and the author shown.
    @Test(arguments: [
        ("<author>joe@example.com (Joe Bloggs)</author>", "Joe Bloggs (joe@example.com)"),
        ("<author>  joe@example.com   ( Joe  Bloggs ) </author>", "Joe Bloggs (joe@example.com)"),
        ("<author>joe@example.com</author>", "joe@example.com"),
        ("<author>Joe Bloggs</author>", "Joe Bloggs"),
        ("<author>Joe Bloggs &lt;joe@example.com&gt;</author>", "Joe Bloggs (joe@example.com)"),
        ("<author>Joe (the editor)</author>", "Joe (the editor)"),  // a remark, not an address
        ("<dc:creator>The Editors</dc:creator>", "The Editors"),
        ("<dc:creator>Ann</dc:creator><dc:creator>Bob</dc:creator><dc:creator>Ann</dc:creator>", "Ann, Bob"),
        ("<itunes:author>Ann Example</itunes:author>", "Ann Example"),
        // Two kinds: RSS's own wins, then Dublin Core's, whatever their order
        ("<author>joe@example.com (Joe)</author><dc:creator>Joe</dc:creator>", "Joe (joe@example.com)"),
        ("<dc:creator>Joe</dc:creator><author>joe@example.com (Joe)</author>", "Joe (joe@example.com)"),
        ("<itunes:author>Pod</itunes:author><dc:creator>Ann</dc:creator><dc:creator>Bob</dc:creator>", "Ann, Bob"),
    ])
    func rssAuthors(_ fields: String, _ expected: String) throws {
        let item = try #require(parse(rss("<item><title>x</title>\(fields)</item>")).items.first)
        #expect(item.author == expected)
    }

    /// An Atom entry's authors, the feed's author, and the author shown.
    @Test(arguments: [
        ("<author><name>Joe</name><email>joe@example.org</email></author>", "", "Joe (joe@example.org)"),
        ("<author><email>joe@example.org</email><name>Joe</name></author>", "", "Joe (joe@example.org)"),
        ("<author><name>Joe</name><uri>https://joe.example.org/</uri></author>", "", "Joe"),
        ("<author><email>anon@example.org</email></author>", "", "anon@example.org"),
        ("<author><name>Ann</name></author><author><name>Bob</name><email>bob@x.org</email></author>", "", "Ann, Bob (bob@x.org)"),
        ("<contributor><name>Not an author</name></contributor>", "", nil),
        // The feed's author (with its email) for an entry without one
        ("", "<author><name>Feed</name><email>feed@example.org</email></author>", "Feed (feed@example.org)"),
        ("<author><name>Own</name></author>", "<author><name>Feed</name></author>", "Own"),
        // A source's author is the other feed's, not the entry's
        ("<source><author><name>Elsewhere</name></author></source>", "<author><name>Feed</name></author>", "Feed"),
    ] as [(String, String, String?)])
    func atomAuthors(_ entryFields: String, _ feedFields: String, _ expected: String?) throws {
        let entry = try #require(parse(atom("<entry><id>urn:x</id><title>x</title>\(entryFields)</entry>", feedLevel: feedFields)).items.first)
        #expect(entry.author == expected)
    }

    @Test func rssAuthorsWithANameAndAnEmailShowBoth() throws {
        let feed = try FeedParser.parse(try fixtureData("rss2-authors.xml"), baseURL: URL(string: "https://authors.example.com/rss")!)

        #expect(feed.items.map(\.author) == [
            "Joe Bloggs (joe@example.com)",  // RSS 2.0's email (Name)
            "Joe Bloggs (joe@example.com)",  // mail's Name <email>
            "Bloggs, Joe (joe@example.com)",  // the quotes go
            "Joe Bloggs",
            "joe@example.com",
            "Joe (the editor)",  // a remark, not an address
            "Ann Example (ann@example.com)",  // already in the form shown
        ])
    }

    @Test func atomAuthorsWithANameAndAnEmailShowBoth() throws {
        let feed = try FeedParser.parse(try fixtureData("atom10-authors.xml"), baseURL: URL(string: "https://authors.example.org/atom")!)

        #expect(feed.items.map(\.author) == [
            "Joe Bloggs (joe@example.org)",
            "Joe Bloggs (joe@example.org)",  // either order, whitespace collapsed
            "Joe Bloggs",  // a uri is not shown
            "anon@example.org",
            "Ann, Bob (bob@example.org)",
            "Feed Owner (owner@example.org)",  // the feed's
        ])
    }

    @Test func aFeedAuthorAfterTheEntriesKeepsItsEmail() throws {
        let feed = try parse(atom("<entry><id>urn:1</id><title>x</title></entry>").replacingOccurrences(
            of: "</feed>", with: "<author><name>Late</name><email>late@example.org</email></author></feed>"))
        #expect(feed.items.first?.author == "Late (late@example.org)")
    }

    @Test func manyAuthorsAreCapped() throws {
        let creators = (1...100).map { "<dc:creator>A\($0)</dc:creator>" }.joined()
        let item = try #require(parse(rss("<item><title>x</title>\(creators)</item>")).items.first)
        #expect(item.author == (1...FeedAuthors.mostAuthors).map { "A\($0)" }.joined(separator: ", "))
    }

    @Test(arguments: [
        ("joe@example.com (Joe)", "Joe (joe@example.com)"),
        ("joe@example.com ()", "joe@example.com ()"),
        ("Joe Bloggs", "Joe Bloggs"),
        ("(Joe)", "(Joe)"),
        ("not an address (Joe)", "not an address (Joe)"),
        ("Joe <joe@example.com>", "Joe (joe@example.com)"),
        ("\"Joe\" <joe@example.com>", "Joe (joe@example.com)"),
        ("<joe@example.com>", "joe@example.com"),
        ("Joe <not an address>", "Joe <not an address>"),
        ("Joe (joe@example.com)", "Joe (joe@example.com)"),  // the form shown reads back as itself
    ])
    func rssForm(_ text: String, _ expected: String) {
        #expect(FeedAuthors.rss(text) == expected)
    }
}
