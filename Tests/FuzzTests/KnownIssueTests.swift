import Depot
import Foundation
import FuzzTargets
import NerdfeedKit
import Testing

/// Crashes the fuzzers found in code Depot does not own (``KnownIssues``):
/// Foundation's `XMLParser` still traps on these inputs. `FeedParser`, which
/// drives libxml2 itself, reads them or rejects them with `.decoding`.
@Suite struct KnownIssueTests {
    /// UTF-8 documents with a byte that is not UTF-8 where `XMLParser` traps.
    /// (Such a byte in text, an attribute value or a processing instruction's
    /// data is a parse error instead.)
    static let invalidUTF8InMarkup: [String: [UInt8]] = [
        "element name": Array("<rss version=\"2.0\"><channel><li".utf8) + [0xFF] + Array("nk/></channel></rss>".utf8),
        "attribute name": Array("<rss version=\"2.0\" ".utf8) + [0xFF] + Array("=\"x\"/>".utf8),
        "namespace prefix": Array("<rss xmlns:".utf8) + [0xFF] + Array("=\"urn:x\"/>".utf8),
        "comment": Array("<rss version=\"2.0\"><!--".utf8) + [0x80] + Array("--></rss>".utf8),
        "processing instruction's target": Array("<rss version=\"2.0\"><?p".utf8) + [0xFF] + Array(" x?></rss>".utf8),
        "UTF-16 declared without a byte order mark": Array("<?xml version=\"1.0\" encoding=\"UTF-16\"?><rss><".utf8) + [0xFF] + Array("/></rss>".utf8),
        "Latin-1 declared by a declaration libxml2 does not read": Array("<?xml mode=\"x\" version=\"1.0\" encoding=\"ISO-8859-1\"?><rss><".utf8) + [0xFF] + Array("/></rss>".utf8),
    ]

    /// Well-formed feeds with a processing instruction without data, where `XMLParser` crashes.
    static let instructionsWithoutData: [String: String] = [
        "in the channel": "<rss version=\"2.0\"><channel><?pi?><title>PI</title></channel></rss>",
        "after the root": "<?xml version=\"1.0\"?><rss version=\"2.0\"><channel/></rss><?pi?>",
    ]

    @Test(arguments: instructionsWithoutData.keys.sorted())
    func feedParserReadsAProcessingInstructionWithoutData(place: String) async throws {
        let text = try #require(Self.instructionsWithoutData[place])
        #expect(KnownIssues.xmlParserTraps(on: Data(text.utf8)))
        #expect(!KnownIssues.xmlParserTraps(on: Data(text.replacingOccurrences(of: "<?pi?>", with: "<?pi ?>").utf8)))
        // Then FeedParser reads the feed (or rejects it) rather than letting XMLParser crash.
        await #expect(processExitsWith: .success) { [text = text as String] in
            _ = try? FeedParser.parse(Data(text.utf8), baseURL: URL(string: "https://forums.example.com/rss")!)
        }
    }

    @Test(arguments: invalidUTF8InMarkup.keys.sorted())
    func feedParserRejectsInvalidUTF8InMarkup(place: String) async throws {
        let bytes = try #require(Self.invalidUTF8InMarkup[place])
        #expect(KnownIssues.xmlParserTraps(on: Data(bytes)))
        // Then FeedParser throws .decoding rather than letting XMLParser trap.
        await #expect(processExitsWith: .success) { [bytes = bytes as [UInt8]] in
            var rejected = false
            do {
                _ = try FeedParser.parse(Data(bytes), baseURL: URL(string: "https://forums.example.com/rss")!)
            } catch let error as DepotError {
                rejected = error.code == .decoding
            }
            if !rejected { exit(1) }
        }
    }

    @Test func documentsLibxml2ConvertsAreNotSkipped() {
        // Valid UTF-8, and invalid bytes in a document libxml2 converts from another encoding.
        let latin1: [UInt8] = Array("<?xml version='1.0' encoding = 'ISO-8859-1'?><rss><".utf8) + [0xFF] + Array("/></rss>".utf8)
        var utf16: [UInt8] = []
        for unit in "<rss/>".utf16 { utf16 += [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        utf16 += [0x00, 0xD8]  // a lone surrogate: libxml2's conversion reports it
        let declaredUTF8: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("<?xml version=\"1.0\" encoding=\"utf-8\"?><".utf8) + [0xFF] + Array("/>".utf8)
        #expect(!KnownIssues.xmlParserTraps(on: Data("<rss><!-- é --></rss>".utf8)))
        #expect(!KnownIssues.xmlParserTraps(on: Data(latin1)))
        #expect(!KnownIssues.xmlParserTraps(on: Data(utf16)))
        #expect(KnownIssues.xmlParserTraps(on: Data(declaredUTF8)))
    }
}
