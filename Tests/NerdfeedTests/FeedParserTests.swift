import Depot
import Foundation
import Testing
@testable import NerdfeedKit

@Suite struct FeedParserTests {
    // MARK: - Fixtures, one per format

    @Test func rss2ReadsEveryKindOfItem() throws {
        let feed = try FeedParser.parse(try fixtureData("rss2.xml"), baseURL: forumFeedURL)

        // The channel's title, not the image's; the item without a link is skipped.
        #expect(feed.title == "Big Nerd Ranch Forums & Friends")
        #expect(feed.skippedItems == 1)
        #expect(feed.items.map(\.link) == [
            "https://forums.example.com/viewtopic.php?t=101&p=1",  // entity in the link
            "https://forums.example.com/forum/posts/102",  // root-relative
            "https://forums.example.com/feeds/posts/103",  // relative to the feed's folder
            "https://forums.example.com/forum/posts/104",  // only a permalink guid
            "http://forums.example.com/forum/posts/106",  // whitespace around the link
        ])

        let breadcrumbs = feed.items[0]
        #expect(breadcrumbs.title == "Web Services")
        #expect(breadcrumbs.author == "joeconway")
        #expect(breadcrumbs.published == utc("2003-06-10T04:00:00Z"))
        // The description wins over content:encoded; HTML in CDATA becomes text.
        #expect(breadcrumbs.summary == "Does the store fetch twice & why?")

        let entities = feed.items[1]
        #expect(entities.title == "Café & Cache: the sequel")  // numeric, double-escaped, tags, newlines, tabs
        #expect(entities.published == utc("2003-06-11T07:30:00.250Z"))  // RFC 3339 in dc:date, with an offset
        #expect(entities.summary == "Only content here \u{2014} no description.")  // content:encoded when no description

        let undated = feed.items[2]
        #expect(undated.title == "Off Topic :: Hello")  // two parts: kept as is
        #expect(undated.published == nil)
        #expect(undated.author == "K. Mackenzie")  // RSS author: "email (name)"

        let guidOnly = feed.items[3]
        #expect(guidOnly.title == "Blocks")  // four parts: the one before the last
        #expect(guidOnly.published == utc("2003-06-10T09:00:00Z"))  // no weekday, 2-digit year, no seconds, EST
        #expect(guidOnly.summary == "A video about blocks")  // media:description
        #expect(guidOnly.author == nil)

        let cdataTitle = feed.items[4]
        #expect(cdataTitle.title == "Tips & tricks: async let")
        #expect(cdataTitle.published == nil)  // "sometime last week"
        #expect(cdataTitle.summary == "Escaped HTML in the description.")
    }

    @Test func rss1ReadsRDFWithDublinCoreDates() throws {
        let feed = try FeedParser.parse(try fixtureData("rss1.rdf"), baseURL: URL(string: "https://planet.example.org/rss10.xml")!)

        #expect(feed.title == "Planet Example")
        #expect(feed.items.count == 3)
        #expect(feed.items[0] == ParsedItem(
            link: "https://planet.example.org/2004/01/first", title: "First post", author: "Mark",
            summary: "Hello RDF world", published: utc("2004-01-15T10:20:30Z")))
        // No <link>: the rdf:about is the item's URI.
        #expect(feed.items[1].link == "https://planet.example.org/2004/01/second")
        #expect(feed.items[1].published == utc("2004-01-16T00:00:00Z"))
        #expect(feed.items[2].published == utc("2004-01-17T13:00:00Z"))
    }

    @Test func atom10ResolvesBasesAndPicksTheAlternateLink() throws {
        let feed = try FeedParser.parse(try fixtureData("atom10.xml"), baseURL: URL(string: "https://elsewhere.example.com/feeds/atom")!)

        #expect(feed.title == "Example Blog")
        #expect(feed.skippedItems == 1)  // only rel="edit"
        #expect(feed.items.count == 3)

        let first = feed.items[0]
        #expect(first.link == "https://blog.example.com/2005/07/atom-and-you")  // xml:base on the feed
        #expect(first.title == "Atom & you")  // type="html"
        #expect(first.author == "Mark P")
        #expect(first.summary == "Short summary.")
        #expect(first.published == utc("2005-07-30T10:00:00.123Z"))  // published beats updated

        let second = feed.items[1]
        #expect(second.link == "https://blog.example.com/archive/post-2")  // xml:base on the entry, no rel
        #expect(second.author == "Feed Author")  // inherited from the feed
        #expect(second.summary == "Only content here.")
        #expect(second.published == utc("2005-08-01T06:00:00Z"))  // only updated

        let third = feed.items[2]
        #expect(third.link == "https://blog.example.com/x.html")  // the HTML alternate over the PDF one
        #expect(third.title == "XHTML title")
        #expect(third.author == "anon@example.com")
        #expect(third.published == utc("2005-08-02T04:30:00Z"))
    }

    @Test func atom03ReadsIssuedModifiedAndModes() throws {
        let feed = try FeedParser.parse(try fixtureData("atom03.xml"), baseURL: URL(string: "http://old.example.net/atom.xml")!)

        #expect(feed.title == "Old Atom Feed")
        #expect(feed.items == [
            ParsedItem(link: "http://old.example.net/2004/03/03", title: "Zero point three", author: "Old Author",
                       summary: "Plain summary", published: utc("2004-03-01T13:00:00Z")),
            ParsedItem(link: "http://old.example.net/2004/03/04", title: "Escaped & title", author: "DC Person",
                       summary: "XML mode content", published: utc("2004-03-04T10:00:00Z")),
        ])
    }

    // MARK: - Bad input

    @Test(arguments: ["malformed.xml", "truncated.xml"])
    func brokenFixturesFailWithDecoding(_ name: String) throws {
        let error = #expect(throws: DepotError.self) {
            try FeedParser.parse(try fixtureData(name), baseURL: forumFeedURL)
        }
        #expect(error?.code == .decoding)
        #expect(error?.detail?.contains("malformed XML at line") == true)
        // The line reaches the message that the sync status shows.
        #expect(error?.description.contains("line") == true)
    }

    @Test func aBareAmpersandSaysWhere() throws {
        let error = #expect(throws: DepotError.self) {
            try FeedParser.parse(try fixtureData("malformed.xml"), baseURL: forumFeedURL)
        }
        #expect(error?.detail?.contains("line 6") == true, "\(String(describing: error?.detail))")
    }

    @Test(arguments: [
        ("", "empty"),
        ("<html><body><p>Bad gateway</p></body></html>", "root element is <html>"),
        (#"{"feed": []}"#, "malformed XML"),
        ("<rss version=\"2.0\"><channel><title>x</title></rss>", "malformed XML"),
        ("<?xml version=\"1.0\"?>", "malformed XML"),
    ])
    func notAFeedFailsWithDecoding(_ body: String, _ detail: String) throws {
        let error = #expect(throws: DepotError.self) {
            try FeedParser.parse(Data(body.utf8), baseURL: forumFeedURL)
        }
        #expect(error?.code == .decoding)
        #expect(error?.detail?.contains(detail) == true, "\(String(describing: error?.detail))")
    }

    // MARK: - Tricky cases

    @Test func breadcrumbsCanBeKept() throws {
        let feed = try FeedParser.parse(try fixtureData("rss2.xml"), baseURL: forumFeedURL, removingBreadcrumbs: false)
        #expect(feed.items[0].title == "Chapter 24 :: Web Services :: Re: fetch twice?")
    }

    @Test(arguments: [
        ("Chapter 7 :: View Controllers :: Re: fetch twice?", "View Controllers"),
        ("A :: B :: C :: D", "C"),  // greedy, as the original pattern .* :: (.*) :: .*
        ("Off Topic :: Hello", "Off Topic :: Hello"),  // no match: as is
        ("A ::  :: C", "A ::  :: C"),  // an empty kept part: as is
        ("No breadcrumbs here", "No breadcrumbs here"),
        ("C++::templates", "C++::templates"),
    ])
    func breadcrumbRule(_ title: String, _ expected: String) {
        #expect(FeedText.removingBreadcrumbs(title) == expected)
    }

    @Test func htmlWithUnclosedAngleBracketsKeepsThem() {
        #expect(FeedText.plainText(fromHTML: "<p>a < b</p> and c < d") == "a < b and c < d")
        // Many "<" and no ">": each is kept, in one pass over the text.
        let brackets = String(repeating: "x <", count: 20_000)
        #expect(FeedText.plainText(fromHTML: brackets) == brackets)
    }

    @Test func itemsWithoutATitleOrWithUnknownExtensionsStillParse() throws {
        let xml = """
        <rss version="2.0" xmlns:x="urn:unknown"><channel><title>t</title>
        <item><x:rating><x:stars>5</x:stars></x:rating><description>&lt;p&gt;Only a description&lt;/p&gt;</description>
        <link>https://example.com/a</link><x:title>not this</x:title></item>
        <item><link>https://example.com/b</link></item>
        </channel></rss>
        """
        let feed = try FeedParser.parse(Data(xml.utf8), baseURL: forumFeedURL)
        #expect(feed.items.map(\.title) == ["Only a description", "https://example.com/b"])
    }

    @Test func undeclaredWellKnownPrefixesStillCount() throws {
        let xml = """
        <rss version="2.0"><channel><title>t</title>
        <item><title>Hi</title><link>https://example.com/a</link><dc:creator>Ann</dc:creator></item>
        </channel></rss>
        """
        // Not namespace-well-formed: libxml2 on Linux refuses it (error 201) and
        // the feed fails as a decoding error; Apple's parser reads on and finds the author.
        #if os(Linux)
        let error = #expect(throws: DepotError.self) { try FeedParser.parse(Data(xml.utf8), baseURL: forumFeedURL) }
        #expect(error?.code == .decoding)
        #else
        let feed = try FeedParser.parse(Data(xml.utf8), baseURL: forumFeedURL)
        #expect(feed.items.first?.author == "Ann")
        #endif
    }

    @Test func latin1FeedsAreDecodedByTheirDeclaration() throws {
        var data = Data(#"<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel><title>"#.utf8)
        data.append(contentsOf: [0x43, 0x61, 0x66, 0xE9])  // "Café" in Latin-1
        data.append(Data("</title><item><title>x</title><link>https://example.com/x</link></item></channel></rss>".utf8))
        let feed = try FeedParser.parse(data, baseURL: forumFeedURL)
        #expect(feed.title == "Café")
    }

    // MARK: - Dates

    @Test(arguments: [
        ("Tue, 10 Jun 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("10 Jun 2003 04:00:00 +0000", "2003-06-10T04:00:00Z"),
        ("Tuesday, 10 Jun 2003 04:00:00 -0700", "2003-06-10T11:00:00Z"),
        ("Tue, 10 Jun 03 04:00 EST", "2003-06-10T09:00:00Z"),
        ("Thu, 10 Jun 99 04:00:00 UT", "1999-06-10T04:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 PDT", "2005-01-01T07:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 +05:30", "2003-06-09T22:30:00Z"),
        ("Tue, 10 Jun 2003 04:00:00", "2003-06-10T04:00:00Z"),
        ("Tue, 10 June 2003 04:00:00 Z", "2003-06-10T04:00:00Z"),
        ("  Tue, 10 Jun 2003 04:00:00 GMT\n", "2003-06-10T04:00:00Z"),
        ("2003-12-13T18:30:02Z", "2003-12-13T18:30:02Z"),
        ("2003-12-13T18:30:02.25Z", "2003-12-13T18:30:02.250Z"),
        ("2003-12-13T18:30:02+01:00", "2003-12-13T17:30:02Z"),
        ("2003-12-13T18:30:02.500-05:00", "2003-12-13T23:30:02.500Z"),
        ("2003-12-13T18:30Z", "2003-12-13T18:30:00Z"),
        ("2003-12-13 18:30:02", "2003-12-13T18:30:02Z"),
        ("2003-12-13", "2003-12-13T00:00:00Z"),
        ("2004-02-29T12:00:00Z", "2004-02-29T12:00:00Z"),
        ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"),
        ("Fri, 31 Dec 9999 18:00:00 -0500", "9999-12-31T23:00:00Z"),
    ])
    func readableDates(_ text: String, _ expected: String) {
        #expect(FeedDate.parse(text) == utc(expected), "\(text)")
    }

    @Test func theFirstDayOfYearOneIsProlepticGregorian() {
        // Foundation's formatters switch to the Julian calendar before 1582; feeds do not.
        #expect(FeedDate.parse("0001-01-01T00:00:00Z") == Date(timeIntervalSince1970: -62_135_596_800))
    }

    @Test(arguments: [
        "", "   ", "sometime last week", "Tue, 31 Feb 2003 04:00:00 GMT", "Tue, 10 Foo 2003 04:00:00 GMT",
        "Blursday, 10 Jun 2003 04:00:00 GMT", "Tue, 10 Jun 2003 25:00:00 GMT", "Tue, 10 Jun 2003 04:00:00 +99",
        "2003-13-01", "2003-12-13T25:00:00Z", "2003-12-13T18:30:02+0", "2003-12-13T18:30:02Zjunk", "2005-02-29",
        "12/13/2003", "1070000000",
        // Valid where written, but in UTC in year 10000 or year 0: the cache cannot store them.
        "Fri, 31 Dec 9999 23:00:00 -0500", "9999-12-31T23:00:00-05:00", "9999-12-31T23:59:60Z", "0001-01-01T00:30:00+01:00",
    ])
    func garbageDatesAreNil(_ text: String) {
        #expect(FeedDate.parse(text) == nil, "\(text)")
    }
}
