import Foundation
import Testing
@testable import NerdfeedKit

/// Titles and summaries show as plain text whatever their encoding.
@Suite struct FeedTextTests {
    // MARK: - Through the parser, one encoding each

    /// An RSS item with `fields` and a link, and its expected title and summary.
    @Test(arguments: [
        // Entities, escaped once or twice, named or numeric
        ("<title>AT&amp;amp;T</title>", "AT&T", nil),
        ("<title>Caf&#233; &#x2014; ok</title>", "Café — ok", nil),
        ("<title>Caf&amp;eacute; &amp;ndash; &amp;euro;5 &amp;hellip;</title>", "Café – €5 …", nil),
        // Markup, escaped or in CDATA
        ("<title>&lt;b&gt;Bold&lt;/b&gt; move</title>", "Bold move", nil),
        ("<title>&lt;i&gt;Why&lt;/i&gt;? &amp;ldquo;&lt;a href='x'&gt;Fast&lt;/a&gt;&amp;rdquo;&lt;br&gt;now</title>", "Why? \u{201C}Fast\u{201D} now", nil),
        ("<title><![CDATA[Tips & <code>tricks</code>]]></title>", "Tips & tricks", nil),
        ("<title>1 &lt; 2 and 3 &gt; 2</title>", "1 < 2 and 3 > 2", nil),
        ("<title>x</title><description>&lt;p&gt;Para&lt;/p&gt;&lt;p&gt;Two&amp;nbsp;words&lt;/p&gt;</description>", "x", "Para Two words"),
        ("<title>x</title><description><![CDATA[<p>A &amp; B</p>]]></description>", "x", "A & B"),
        // What a browser would not show is not text
        ("<title>x</title><description><![CDATA[<style>p { color: red }</style><p>Shown</p><script>if (a > b) alert(1)</script><!-- a > b -->]]></description>", "x", "Shown"),
        // content:encoded when there is no description
        ("<title>x</title><content:encoded><![CDATA[<div>Full <i>post</i></div>]]></content:encoded>", "x", "Full post"),
        // Whitespace of every kind collapses
        ("<title>\n  Two\tlines\n  here </title>", "Two lines here", nil),
    ] as [(String, String, String?)])
    func rssTextIsPlain(_ fields: String, _ title: String, _ summary: String?) throws {
        let item = try #require(parse(rss("<item>\(fields)<link>https://example.com/a</link></item>")).items.first)
        #expect(item.title == title)
        #expect(item.summary == summary)
    }

    /// An Atom entry with `fields` and an id, and its expected title and summary.
    @Test(arguments: [
        // type="text" (the default): what looks like markup or an entity is text
        (#"<title type="text">AT&amp;amp;T</title>"#, "AT&amp;T", nil),
        ("<title>&lt;b&gt;not markup&lt;/b&gt;</title>", "<b>not markup</b>", nil),
        (#"<title>x</title><summary type="text">3 &lt; 4</summary>"#, "x", "3 < 4"),
        // type="html": escaped or in CDATA
        (#"<title type="html">AT&amp;amp;T &lt;b&gt;rocks&lt;/b&gt;</title>"#, "AT&T rocks", nil),
        (#"<title type="html"><![CDATA[Caf&eacute; <em>au lait</em>]]></title>"#, "Café au lait", nil),
        (#"<title>x</title><summary type="html">&lt;p&gt;One&lt;/p&gt;&lt;p&gt;Two&lt;/p&gt;</summary>"#, "x", "One Two"),
        // type="xhtml": the markup's text, entities as XML reads them
        (#"<title type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml">An <b>X</b>HTML &amp; &lt;title&gt;<br/>next</div></title>"#, "An XHTML & <title> next", nil),
        (#"<title>x</title><summary type="xhtml"><div xmlns="http://www.w3.org/1999/xhtml"><p>First.</p><p>Second.</p></div></summary>"#, "x", "First. Second."),
        // content with a media type: HTML, or XML inline
        (#"<title>x</title><content type="text/html">&lt;p&gt;Tagged&lt;/p&gt;</content>"#, "x", "Tagged"),
        (#"<title>x</title><content type="application/xhtml+xml"><div xmlns="http://www.w3.org/1999/xhtml"><p>Inline &lt;b&gt; text</p></div></content>"#, "x", "Inline <b> text"),
        (#"<title>x</title><content type="text">&lt;p&gt; stays</content>"#, "x", "<p> stays"),
    ] as [(String, String, String?)])
    func atomTextIsPlain(_ fields: String, _ title: String, _ summary: String?) throws {
        let entry = try #require(parse(atom("<entry><id>urn:x</id>\(fields)</entry>")).items.first)
        #expect(entry.title == title)
        #expect(entry.summary == summary)
    }

    /// Atom 0.3: a MIME type (text/plain by default) and a mode.
    @Test(arguments: [
        (#"<title mode="escaped" type="text/html">&lt;b&gt;Bold&lt;/b&gt; &amp;amp; co</title>"#, "Bold & co"),
        (#"<title mode="escaped">&lt;b&gt;Bold&lt;/b&gt;</title>"#, "Bold"),  // escaped without a type: taken for HTML
        (#"<title mode="escaped" type="text/plain">Fish &amp;amp; chips</title>"#, "Fish &amp; chips"),
        (#"<title mode="xml" type="application/xhtml+xml"><div xmlns="http://www.w3.org/1999/xhtml">XML <i>mode</i></div></title>"#, "XML mode"),
        (#"<title type="text/plain">Plain &lt;text&gt;</title>"#, "Plain <text>"),
    ])
    func atom03TextIsPlain(_ title: String, _ expected: String) throws {
        let xml = #"<feed version="0.3" xmlns="http://purl.org/atom/ns#"><title>t</title><entry><id>tag:x,2004:1</id>"# + title + "</entry></feed>"
        #expect(try parse(xml).items.first?.title == expected)
    }

    @Test func feedTitlesArePlainToo() throws {
        #expect(try parse(rss("").replacingOccurrences(of: "<title>t</title>", with: "<title>AT&amp;amp;T &lt;i&gt;News&lt;/i&gt;</title>")).title == "AT&T News")
        #expect(try parse(#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="html">A &lt;em&gt;b&lt;/em&gt;</title></feed>"#).title == "A b")
    }

    @Test func atomTitlesWithMarkupArePlain() throws {
        let feed = try FeedParser.parse(try fixtureData("atom10-titles.xml"), baseURL: URL(string: "https://titles.example.com/atom")!)

        #expect(feed.title == "The Markup Blog")
        #expect(feed.items.map(\.title) == [
            "An xhtml title & more, 1 < 2",  // the div's text, whitespace collapsed
            "Block two",  // a prefixed div; blocks separate words
            "HTML & title",  // type="html", escaped
            "CDATA & html",  // type="html", in CDATA
            "Text with inline markup anyway",  // markup that type="text" does not allow
        ])
    }

    @Test func rssTitlesWithUnescapedMarkupArePlain() throws {
        let feed = try FeedParser.parse(try fixtureData("rss2-titles.xml"), baseURL: forumFeedURL)

        #expect(feed.title == "The Unescaped Channel")
        #expect(feed.items.map(\.title) == ["Hello bold world", "Line break", "Namespaced and emphatic"])
        #expect(feed.items.last?.summary == "Some inline text and a paragraph")
    }

    // MARK: - FeedText

    @Test func htmlWithUnclosedAngleBracketsKeepsThem() {
        #expect(FeedText.plainText(fromHTML: "<p>a < b</p> and c < d") == "a < b and c < d")
        // Many "<" and no ">": each is kept, in one pass over the text.
        let brackets = String(repeating: "x <", count: 20_000)
        #expect(FeedText.plainText(fromHTML: brackets) == brackets)
    }

    @Test func inlineTagsJoinAndOthersSeparate() {
        #expect(FeedText.plainText(fromHTML: "<p>A &amp; <b>B</b>!</p><p>C</p>") == "A & B! C")
        #expect(FeedText.plainText(fromHTML: "un<EM>believ</EM>able<br/>next<li>item</li>") == "unbelievable next item")
        #expect(FeedText.plainText(fromHTML: "<span class=\"x\">a</span><div>b</div><bogus>c</bogus>") == "a b c")
    }

    @Test func scriptsStylesAndCommentsAreNotText() {
        #expect(FeedText.plainText(fromHTML: "<SCRIPT type=x>a<b</Script >ok<style>.c{}</style>") == "ok")
        #expect(FeedText.plainText(fromHTML: "a<!-- x > y -->b<!---->c") == "a b c")
        // No end: the tag goes, the text after it stays, and the end is looked for once.
        #expect(FeedText.plainText(fromHTML: "<script>never closed") == "never closed")
        let many = String(repeating: "<script>x", count: 5_000)
        #expect(FeedText.plainText(fromHTML: many) == Array(repeating: "x", count: 5_000).joined(separator: " "))
        // A self-closed script hides nothing.
        #expect(FeedText.plainText(fromHTML: "<script src=a.js/>shown") == "shown")
    }

    @Test(arguments: [
        ("&eacute;t&eacute; &agrave; &Uuml;ber", "été à Über"),
        ("&lsquo;q&rsquo; &bull; &middot; &times; &deg; &pound;", "‘q’ • · × ° £"),
        ("&#8217; &#x2014; &#X41;", "’ — A"),
        ("&unknown; &#xD800; &#99999999; & alone", "&unknown; &#xD800; &#99999999; & alone"),
    ])
    func entities(_ text: String, _ expected: String) {
        #expect(FeedText.decodingEntities(text) == expected)
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
}
