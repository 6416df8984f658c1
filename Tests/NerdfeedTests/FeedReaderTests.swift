import Foundation
import Testing
@testable import NerdfeedKit

/// Which element an item's field comes from when a feed gives it twice: the
/// feed format's own element wins over Dublin Core's, whatever their order,
/// and Dublin Core fills in what the format leaves out.
@Suite struct FeedReaderTests {
    @Test func rss1TakesDublinCoreWhereRSSSaysNothing() throws {
        let feed = try FeedParser.parse(try fixtureData("rss1-dublin-core.rdf"), baseURL: URL(string: "https://dc.example.org/rss10.xml")!)

        #expect(feed.title == "Dublin Core Planet")  // the channel's dc:title
        #expect(feed.items == [
            ParsedItem(id: "https://dc.example.org/1", link: "https://dc.example.org/1", title: "Only Dublin Core",
                       author: "Dee Sea (editor@dc.example.org)", summary: "A DC description", published: utc("2004-01-20T09:00:00Z")),
            // RSS's own title and description win, though they come after Dublin Core's
            ParsedItem(id: "https://dc.example.org/2", link: "https://dc.example.org/2.html", title: "RSS title",
                       summary: "RSS description"),
            ParsedItem(id: "https://dc.example.org/3", link: "https://dc.example.org/3", title: "RSS title first",
                       summary: "RSS description first", published: utc("2004-01-22T00:00:00Z")),
        ])
    }

    @Test func rss2PubDateAndAuthorWinOverDublinCoreInEitherOrder() throws {
        let feed = try FeedParser.parse(try fixtureData("rss2-dublin-core.xml"), baseURL: URL(string: "https://both.example.com/rss")!)

        #expect(feed.title == "RSS and Dublin Core")  // not the dc:title after it
        #expect(feed.items.map(\.published) == [utc("2003-06-10T04:00:00Z"), utc("2003-06-11T04:00:00Z"), utc("2003-06-12T12:00:00Z")])
        #expect(feed.items.map(\.author) == ["Joe (joe@example.com)", "Joe (joe@example.com)", "DC Creator"])
        #expect(feed.items.map(\.summary) == [nil, nil, "Only a DC description"])
    }
}
