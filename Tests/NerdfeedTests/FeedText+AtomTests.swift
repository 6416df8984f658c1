import Foundation
import Testing
import TextLayout
@testable import NerdfeedKit

/// Atom 0.3's `mode`: base64, escaped and xml (the default) text all show as
/// plain text; base64 that does not decode to text leaves its field out.
@Suite struct FeedTextAtomTests {
    static let feedURL = URL(string: "http://modes.example.net/atom.xml")!

    @Test func atom03ModesReadAsPlainText() throws {
        let feed = try FeedParser.parse(try fixtureData("atom03-modes.xml"), baseURL: Self.feedURL)

        #expect(feed.title == "Base64 title: café")
        #expect(feed.skippedItems == 0)
        #expect(feed.items.map(\.title) == [
            "Base64 title: café",
            "No padding!",  // base64 without its "=", decoded all the same
            "Escaped title & more",
            "Default xml mode",  // markup as child elements, the default mode
            "Content shown instead",  // not base64: no title, so the summary's start
            "Binary content",
            "Clear \u{1B}[2J the screen",  // the real text, as the cache keeps it
        ])
        #expect(feed.items.map(\.summary) == [
            "Decoded HTML & more",  // base64 of HTML
            "A long post, line-wrapped at 76 characters as MIME writes base64, with an entity é too.",  // content, wrapped
            "Escaped summary",
            "First. Second part",  // an XML media type: child elements
            "Content shown instead",  // base64 that is not UTF-8 left out: the content instead
            nil,  // an image is not text
            "Retitle \u{1B}]0;pwned\u{7} the window",
        ])
    }

    @Test func decodedEscapesReachTheTerminalOnlyAsPictures() throws {
        // Given the entry whose base64 title and summary decode to terminal escapes
        let feed = try FeedParser.parse(try fixtureData("atom03-modes.xml"), baseURL: Self.feedURL)
        let parsed = try #require(feed.items.last)
        let item = FeedItem(id: parsed.id, link: parsed.link, title: parsed.title, author: parsed.author,
                            summary: parsed.summary, published: parsed.published, feed: "f")

        // When the reader draws it, as a row and as its detail
        let row = NerdfeedPresentation.itemLine(item, width: 80, now: Date(timeIntervalSince1970: 0))
        let detail = NerdfeedPresentation.detailLines(item, width: 80, now: Date(timeIntervalSince1970: 0), footer: "")

        // Then ESC and BEL show as their pictures, as every other field's do
        for text in [row] + detail {
            #expect(!text.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(text.debugDescription)")
        }
        #expect(row.contains("Clear ␛[2J the screen"))
        #expect(detail.contains("  Clear ␛[2J the screen"))
        #expect(detail.contains("  Retitle ␛]0;pwned␇ the window"))
    }

    @Test(arguments: [
        ("SGVsbG8=", "Hello"),
        ("SGVsbG8", "Hello"),  // padding left out
        ("SGVsbG8===", "Hello"),  // more padding than needed
        (" SGVs\n\tbG8=\r\n", "Hello"),  // wrapped and indented
        ("", ""),
    ])
    func base64DecodesToText(_ text: String, _ expected: String) {
        #expect(FeedText.decodingBase64(text) == expected)
    }

    @Test(arguments: [
        "!!! not base64 !!!",
        "SGVsb",  // one character too many: no whole byte
        "SGV=sbG8",  // padding inside
        "SGVs\u{0}bG8=",  // a character outside the alphabet, even one that is not printed
        "//4AZ2FyYmFnZQ==",  // decodes, but not to UTF-8
    ])
    func base64ThatIsNotTextIsNil(_ text: String) {
        #expect(FeedText.decodingBase64(text) == nil)
    }

    /// An Atom text's characters, type and mode, and the text shown.
    @Test(arguments: [
        ("PGI+SGk8L2I+", "text/html", "base64", "Hi"),
        ("PGI+SGk8L2I+", "text/plain", "base64", "<b>Hi</b>"),  // plain text, though it looks like markup
        ("PGI+SGk8L2I+", nil, "base64", "Hi"),  // no type: taken for HTML, as escaped text is
        ("iVBORw0KGgo=", "image/png", "base64", ""),  // not text
        ("not base64!", "text/html", "base64", ""),  // not base64: the field is left out
        ("<b>Hi</b>", "text/html", "escaped", "Hi"),
        ("  Hi\n  there ", nil, "xml", "Hi there"),
    ] as [(String, String?, String?, String)])
    func atomTextReadsItsTypeAndMode(_ text: String, _ type: String?, _ mode: String?, _ expected: String) {
        #expect(FeedText.atomText(text, type: type, mode: mode) == expected)
    }
}
