import Depot
import Foundation
import Testing
@testable import NerdfeedKit

/// Every format, one fixture each (and one more for entries without links),
/// then bad input and tricky cases. Text, authors, identities and dates have
/// suites of their own.
@Suite struct FeedParserTests {
    // MARK: - Fixtures, one per format

    @Test func rss2ReadsEveryKindOfItem() throws {
        let feed = try FeedParser.parse(try fixtureData("rss2.xml"), baseURL: forumFeedURL)

        // The channel's title, not the image's; every item is kept, the one without a link too.
        #expect(feed.title == "Big Nerd Ranch Forums & Friends")
        #expect(feed.skippedItems == 0)
        #expect(feed.items.map(\.link) == [
            "https://forums.example.com/viewtopic.php?t=101&p=1",  // entity in the link
            "https://forums.example.com/forum/posts/102",  // root-relative
            "https://forums.example.com/feeds/posts/103",  // relative to the feed's folder
            "https://forums.example.com/forum/posts/104",  // only a permalink guid
            nil,  // only a guid that is no permalink
            "http://forums.example.com/forum/posts/106",  // whitespace around the link
        ])
        // The guid first (permalink or not), else the link.
        #expect(feed.items.map(\.id) == [
            "post-101",
            "https://forums.example.com/forum/posts/102",
            "https://forums.example.com/feeds/posts/103",
            "https://forums.example.com/forum/posts/104",
            "post-105",
            "http://forums.example.com/forum/posts/106",
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
        #expect(undated.author == "K. Mackenzie (kmack@example.com)")  // RSS author "email (name)", name first

        let guidOnly = feed.items[3]
        #expect(guidOnly.title == "Blocks")  // four parts: the one before the last
        #expect(guidOnly.published == utc("2003-06-10T09:00:00Z"))  // no weekday, 2-digit year, no seconds, EST
        #expect(guidOnly.summary == "A video about blocks")  // media:description
        #expect(guidOnly.author == nil)

        let orphan = feed.items[4]
        #expect(orphan.title == "Orphan without a link")
        #expect(orphan.published == utc("2003-06-10T05:00:00Z"))

        let cdataTitle = feed.items[5]
        #expect(cdataTitle.title == "Tips & tricks: async let")
        #expect(cdataTitle.published == nil)  // "sometime last week"
        #expect(cdataTitle.summary == "Escaped HTML in the description.")
    }

    @Test func rss2KeepsEveryEntryWithoutALink() throws {
        let feed = try FeedParser.parse(try fixtureData("rss2-without-links.xml"), baseURL: URL(string: "https://status.example.com/feed.xml")!)

        // Then every item is kept but the one with only a date, and none has a link
        #expect(feed.title == "Example Status")
        #expect(feed.skippedItems == 1)
        #expect(feed.items.count == 6)
        #expect(feed.items.allSatisfy { $0.link == nil })

        #expect(feed.items[0] == ParsedItem(
            id: "incident-2041", title: "Elevated error rates",
            summary: "We are investigating elevated error rates & latency.", published: utc("2026-03-02T09:15:00Z")))
        // A URL that says it is no permalink: the identity, not the link.
        #expect(feed.items[1].id == "https://status.example.com/incidents/2040")
        #expect(feed.items[1].title == "Scheduled maintenance")
        // A podcast episode: guid, iTunes author and summary.
        #expect(feed.items[2] == ParsedItem(
            id: "ep12-7f3a", title: "Episode 12: Offline first", author: "Ann Example",
            summary: "Why the cache comes first, and what a 304 saves.", published: utc("2026-02-28T06:00:00Z")))
        // A title only, twice: told apart by their dates.
        let titleOnly = Array(feed.items[3...4])
        #expect(titleOnly.map(\.title) == ["All systems operational", "All systems operational"])
        #expect(titleOnly.allSatisfy { $0.id.hasPrefix(FeedIdentity.prefix) })
        #expect(titleOnly[0].id != titleOnly[1].id)
        #expect(titleOnly[0].id == FeedIdentity.contentHash(title: "All systems operational", published: utc("2026-02-27T12:00:00Z"), summary: nil))
        // A description only: it titles the item too.
        let descriptionOnly = feed.items[5]
        #expect(descriptionOnly.title == "Resolved: the API is back \u{2014} thanks for your patience.")
        #expect(descriptionOnly.summary == descriptionOnly.title)
        #expect(descriptionOnly.author == "Status Team (ops@example.com)")
        #expect(descriptionOnly.id == FeedIdentity.contentHash(title: descriptionOnly.title, published: nil, summary: descriptionOnly.summary))
    }

    @Test func rss1ReadsRDFWithDublinCoreDates() throws {
        let feed = try FeedParser.parse(try fixtureData("rss1.rdf"), baseURL: URL(string: "https://planet.example.org/rss10.xml")!)

        #expect(feed.title == "Planet Example")
        #expect(feed.items.count == 3)
        #expect(feed.items[0] == ParsedItem(
            id: "https://planet.example.org/2004/01/first", link: "https://planet.example.org/2004/01/first",
            title: "First post", author: "Mark", summary: "Hello RDF world", published: utc("2004-01-15T10:20:30Z")))
        // No <link>: the rdf:about is the item's URI, its identity and its link.
        #expect(feed.items[1].link == "https://planet.example.org/2004/01/second")
        #expect(feed.items[1].id == "https://planet.example.org/2004/01/second")
        #expect(feed.items[1].published == utc("2004-01-16T00:00:00Z"))
        #expect(feed.items[2].published == utc("2004-01-17T13:00:00Z"))
    }

    @Test func rss090ReadsNetscapesRDF() throws {
        let feed = try FeedParser.parse(try fixtureData("rss090.rdf"), baseURL: URL(string: "http://www.mozilla.org/news.rdf")!)

        // The channel's title, not the image's; the item without a link is kept
        #expect(feed.title == "Mozilla Dot Org")
        #expect(feed.skippedItems == 0)
        #expect(feed.items.map(\.title) == ["New Status Updates", "Bugzilla Reorganized", "A title and nothing else"])
        #expect(feed.items.map(\.link) == ["http://www.mozilla.org/status/", "http://www.mozilla.org/bugs/", nil])
        #expect(feed.items[0].id == "http://www.mozilla.org/status/")
        #expect(feed.items[2].id == FeedIdentity.contentHash(title: "A title and nothing else", published: nil, summary: nil))
    }

    @Test func rss091ReadsTheHTMLEntitiesItsDTDDeclares() throws {
        let feed = try FeedParser.parse(try fixtureData("rss091.xml"), baseURL: URL(string: "http://writetheweb.com/rss.xml")!)

        // The DOCTYPE's DTD is not read, yet &eacute; written bare is an é, not a malformed document
        #expect(feed.title == "WriteTheWeb")
        #expect(feed.items.count == 3)
        #expect(feed.items[0].link == "http://writetheweb.com/read.php?item=24")
        #expect(feed.items[0].summary == "WorldOS is a framework on which to build programs that work like Freenet or Gnutella.")
        #expect(feed.items[1].title == "Café society \u{2014} part 2")
        #expect(feed.items[1].summary == "Renée said \u{201C}hi\u{201D}.")
        // A description only: titled by it, known by a hash.
        #expect(feed.items[2].title == "A description only: Syndication is down \u{2014} we are on it.")
        #expect(feed.items[2].link == nil)
        #expect(feed.items[2].id.hasPrefix(FeedIdentity.prefix))
    }

    @Test func rss092ReadsItemsWhoseEveryElementIsOptional() throws {
        let feed = try FeedParser.parse(try fixtureData("rss092.xml"), baseURL: URL(string: "http://www.scripting.com/rss.xml")!)

        #expect(feed.title == "Dave Winer: Grateful Dead")
        #expect(feed.skippedItems == 1)  // only a category
        #expect(feed.items[0] == ParsedItem(
            link: "http://www.scripting.com/mp3s/truckin.html", title: "Truckin'", summary: "It's been a long strange trip."))
        #expect(feed.items[1].title == "Weather Report Suite: the 1973 version.")
        #expect(feed.items[1].link == nil)
        #expect(feed.items[2].title == "Franklin's Tower")
        #expect(feed.items[2].summary == nil)
        #expect(feed.items[2].id == FeedIdentity.contentHash(title: "Franklin's Tower", published: nil, summary: nil))
        #expect(feed.items.count == 3)
    }

    @Test func atom10ResolvesBasesAndPicksTheAlternateLink() throws {
        let feed = try FeedParser.parse(try fixtureData("atom10.xml"), baseURL: URL(string: "https://elsewhere.example.com/feeds/atom")!)

        #expect(feed.title == "Example Blog")
        #expect(feed.skippedItems == 0)
        #expect(feed.items.count == 4)
        #expect(feed.items.map(\.id) == (1...4).map { "tag:blog.example.com,2005:\($0)" })

        let first = feed.items[0]
        #expect(first.link == "https://blog.example.com/2005/07/atom-and-you")  // xml:base on the feed
        #expect(first.title == "Atom & you")  // type="html"
        #expect(first.author == "Mark P (mark@example.com)")
        #expect(first.summary == "Short summary.")
        #expect(first.published == utc("2005-07-30T10:00:00.123Z"))  // published beats updated

        let second = feed.items[1]
        #expect(second.link == "https://blog.example.com/archive/post-2")  // xml:base on the entry, no rel
        #expect(second.author == "Feed Author")  // inherited from the feed
        #expect(second.summary == "Only content here.")
        #expect(second.published == utc("2005-08-01T06:00:00Z"))  // only updated

        // Only rel="edit": no link, known by its id.
        let third = feed.items[2]
        #expect(third.link == nil)
        #expect(third.title == "No alternate link")
        #expect(third.published == utc("2005-08-01T09:00:00Z"))

        let fourth = feed.items[3]
        #expect(fourth.link == "https://blog.example.com/x.html")  // the HTML alternate over the PDF one
        #expect(fourth.title == "XHTML title")
        #expect(fourth.author == "anon@example.com")
        #expect(fourth.published == utc("2005-08-02T04:30:00Z"))
    }

    @Test func atom10KeepsEveryEntryWithoutALink() throws {
        let feed = try FeedParser.parse(try fixtureData("atom10-without-links.xml"), baseURL: URL(string: "https://lab.example.org/atom")!)

        #expect(feed.title == "Lab notes")  // type="html"
        #expect(feed.skippedItems == 0)
        #expect(feed.items.allSatisfy { $0.link == nil })
        #expect(feed.items == [
            // type="text": what looks like markup or an entity is text.
            ParsedItem(id: "urn:uuid:1225c695-cfb8-4ebb-aaaa-80da344efa6a", title: "AT&amp;T <sells> phones",
                       author: "Joe Bloggs (joe@example.org)", summary: "Plain text: 3 < 4 & <b> stays.",
                       published: utc("2026-03-02T09:00:00Z")),
            // type="html", in CDATA and escaped; two authors; the id trimmed.
            ParsedItem(id: "tag:example.org,2026:2", title: "Café notes & more", author: "Ann, bob@example.org",
                       summary: "Escaped HTML & an entity", published: utc("2026-03-01T07:00:00Z")),
            // type="xhtml": the markup's text; no author: the feed's.
            ParsedItem(id: "tag:example.org,2026:3", title: "An XHTML title & more", author: "Feed Owner (owner@example.org)",
                       summary: "First. Second <not a tag>.", published: utc("2026-02-28T12:00:00Z")),
            // What its source says is not the entry's: no link, the feed's author.
            ParsedItem(id: "tag:example.org,2026:4", title: "Copied from another feed", author: "Feed Owner (owner@example.org)",
                       published: utc("2026-02-27T12:00:00Z")),
            // Neither id nor link: a hash.
            ParsedItem(title: "Neither id nor link", author: "Feed Owner (owner@example.org)", summary: "Only content.",
                       published: utc("2026-02-26T12:00:00Z")),
        ])
    }

    @Test func atom03ReadsIssuedModifiedAndModes() throws {
        let feed = try FeedParser.parse(try fixtureData("atom03.xml"), baseURL: URL(string: "http://old.example.net/atom.xml")!)

        #expect(feed.title == "Old Atom Feed")
        #expect(feed.items == [
            ParsedItem(id: "tag:old.example.net,2004:3", link: "http://old.example.net/2004/03/03", title: "Zero point three",
                       author: "Old Author", summary: "Plain summary", published: utc("2004-03-01T13:00:00Z")),
            ParsedItem(id: "tag:old.example.net,2004:4", link: "http://old.example.net/2004/03/04", title: "Escaped & title",
                       author: "DC Person", summary: "XML mode content", published: utc("2004-03-04T10:00:00Z")),
            // Only an id; escaped plain text stays text.
            ParsedItem(id: "tag:old.example.net,2004:5", title: "Only an id", author: "Someone (someone@old.example.net)",
                       summary: "Fish &amp; chips, plain", published: utc("2004-03-05T10:00:00Z")),
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

    @Test func anUndeclaredEntityWithoutADTDIsStillMalformed() throws {
        // Only a DTD that is not read makes &eacute; a warning (rss091.xml); without one it is an error.
        let error = #expect(throws: DepotError.self) {
            try parse(rss("<item><title>Caf&eacute;</title><link>https://example.com/a</link></item>"))
        }
        #expect(error?.code == .decoding)
    }

    @Test func anItemWithNothingToShowIsSkippedAndCounted() throws {
        let feed = try parse(rss("""
            <item><guid isPermaLink="false">only-a-guid</guid><pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item>
            <item><category>only a category</category></item>
            <item><title>   </title><description></description></item>
            <item><title>Kept</title></item>
            """))
        #expect(feed.skippedItems == 3)
        #expect(feed.items.map(\.title) == ["Kept"])
        // The streamed parse says the same.
        let summary = try FeedParser.parse(Data(rss("<item/><item><title>Kept</title></item>").utf8), baseURL: forumFeedURL) { _ in }
        #expect(summary.items == 1 && summary.skippedItems == 1)
    }

    @Test func latin1FeedsAreDecodedByTheirDeclaration() throws {
        var data = Data(#"<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel><title>"#.utf8)
        data.append(contentsOf: [0x43, 0x61, 0x66, 0xE9])  // "Café" in Latin-1
        data.append(Data("</title><item><title>x</title><link>https://example.com/x</link></item></channel></rss>".utf8))
        let feed = try FeedParser.parse(data, baseURL: forumFeedURL)
        #expect(feed.title == "Café")
    }

    @Test func utf16FeedsWithAByteOrderMarkAndUTF8WithOneAreRead() throws {
        let xml = #"<?xml version="1.0" encoding="UTF-16"?><rss version="2.0"><channel><title>Café ☕︎</title><item><title>Ünïcödé 𝄞</title><link>/u</link></item></channel></rss>"#
        let little = Data([0xFF, 0xFE]) + xml.data(using: .utf16LittleEndian)!
        let big = Data([0xFE, 0xFF]) + xml.data(using: .utf16BigEndian)!
        let utf8 = Data([0xEF, 0xBB, 0xBF]) + Data(xml.replacingOccurrences(of: "UTF-16", with: "UTF-8").utf8)
        for data in [little, big, utf8] {
            let feed = try FeedParser.parse(data, baseURL: forumFeedURL)
            #expect(feed.title == "Café ☕︎")
            #expect(feed.items.map(\.title) == ["Ünïcödé 𝄞"])
            #expect(feed.items.map(\.link) == ["https://forums.example.com/u"])
        }
    }

    @Test func aCharacterSplitAcrossTwoChunksIsWhole() throws {
        // Given a title whose 4-byte character straddles the parser's chunk boundary, at each of its 4 offsets
        let head = #"<rss version="2.0"><channel><item><title>"#
        for shift in 1...3 {
            let filler = String(repeating: "a", count: XMLStream.chunkSize - head.utf8.count - shift)
            let xml = head + filler + "𝄞</title><link>/c</link></item></channel></rss>"
            let feed = try FeedParser.parse(Data(xml.utf8), baseURL: forumFeedURL)
            #expect(feed.items.first?.title.hasSuffix("a𝄞") == true, "shift \(shift)")
        }
    }
}
