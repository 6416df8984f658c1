import Foundation
import Testing
@testable import NerdfeedKit

/// An entry's identity: its guid or Atom id, else its link, else a stable hash.
@Suite struct FeedIdentityTests {
    @Test func fnv1a64MatchesItsPublishedValues() {
        // From the FNV reference (isthe.com/chongo/tech/comp/fnv), and computed apart in Python.
        #expect(FeedIdentity.fnv1a64("".utf8) == 0xcbf2_9ce4_8422_2325)
        #expect(FeedIdentity.fnv1a64("a".utf8) == 0xaf63_dc4c_8601_ec8c)
        #expect(FeedIdentity.fnv1a64("foobar".utf8) == 0x8594_4171_f739_67e8)
    }

    @Test func theContentHashIsTheSameEverywhere() {
        // Golden values: a change here would give every link-less entry in every cache a new identity.
        #expect(FeedIdentity.contentHash(title: "All systems operational", published: utc("2026-02-27T12:00:00Z"), summary: nil)
            == "hash:fnv1a64:e04b616dc465b78c")
        #expect(FeedIdentity.contentHash(title: "Service restored", published: nil, summary: nil) == "hash:fnv1a64:25217caee6edfde0")
    }

    @Test func theContentHashTellsTitleDateAndSummaryApart() {
        let date = utc("2026-02-27T12:00:00Z")
        let hashes = [
            FeedIdentity.contentHash(title: "A", published: date, summary: "S"),
            FeedIdentity.contentHash(title: "A", published: date.addingTimeInterval(1), summary: "S"),
            FeedIdentity.contentHash(title: "A", published: date, summary: "T"),
            FeedIdentity.contentHash(title: "B", published: date, summary: "S"),
            FeedIdentity.contentHash(title: "A", published: nil, summary: "S"),
            FeedIdentity.contentHash(title: "A", published: date, summary: nil),
            // The separator keeps fields apart: "AS" + "" is not "A" + "S".
            FeedIdentity.contentHash(title: "AS", published: date, summary: nil),
        ]
        #expect(Set(hashes).count == hashes.count)
        #expect(hashes.allSatisfy { $0.count == FeedIdentity.prefix.count + 16 })
        // The same instant written in another zone is the same entry.
        #expect(FeedDate.parse("Fri, 27 Feb 2026 07:00:00 EST") == date)
    }

    /// An item's elements, and the identity they give it.
    @Test(arguments: [
        (#"<guid isPermaLink="false">post-1</guid><link>https://example.com/1</link>"#, "post-1"),
        (#"<guid>https://example.com/p/1</guid><link>https://example.com/1</link>"#, "https://example.com/p/1"),
        (#"<guid isPermaLink="true">  tag:example.com,2026:1  </guid>"#, "tag:example.com,2026:1"),
        ("<link>https://example.com/1</link>", "https://example.com/1"),
        ("<link>/relative/1</link>", "https://forums.example.com/relative/1"),
        ("<guid></guid><link>https://example.com/1</link>", "https://example.com/1"),  // an empty guid is none
    ])
    func rssIdentity(_ fields: String, _ expected: String) throws {
        let item = try #require(parse(rss("<item><title>x</title>\(fields)</item>")).items.first)
        #expect(item.id == expected)
    }

    @Test func atomIdentityIsTheIdElseTheLinkElseTheHash() throws {
        let entries = try parse(atom("""
            <entry><id>urn:uuid:1</id><title>With id</title><link href="https://example.com/1"/></entry>
            <entry><title>Link only</title><link href="https://example.com/2"/></entry>
            <entry><title>Neither</title><updated>2026-01-01T00:00:00Z</updated></entry>
            """)).items
        #expect(entries.map(\.id) == [
            "urn:uuid:1",
            "https://example.com/2",
            FeedIdentity.contentHash(title: "Neither", published: utc("2026-01-01T00:00:00Z"), summary: nil),
        ])
    }

    @Test func theHashTakesTheTitleBeforeItsBreadcrumbs() throws {
        let items = try parse(rss("""
            <item><title>Forum :: Topic :: Re: one</title></item>
            <item><title>Forum :: Topic :: Re: two</title></item>
            """)).items
        #expect(items.map(\.title) == ["Topic", "Topic"])
        #expect(items[0].id != items[1].id)
        #expect(items[0].id == FeedIdentity.contentHash(title: "Forum :: Topic :: Re: one", published: nil, summary: nil))
    }

    @Test func aParsedItemMadeByHandTakesItsLinkOrAHash() {
        #expect(ParsedItem(link: "https://example.com/1", title: "t").id == "https://example.com/1")
        #expect(ParsedItem(id: "g", link: "https://example.com/1", title: "t").id == "g")
        #expect(ParsedItem(title: "t", summary: "s").id == FeedIdentity.contentHash(title: "t", published: nil, summary: "s"))
    }
}
