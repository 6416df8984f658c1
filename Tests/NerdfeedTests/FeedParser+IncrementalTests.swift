import Depot
import Foundation
import Testing
@testable import NerdfeedKit

/// `FeedParser.Incremental` reads a document pushed in chunks exactly as
/// `FeedParser.parse` reads it whole, however the chunks fall.
@Suite struct FeedParserIncrementalTests {
    /// The outcome of a parse, comparable: the feed, or the error's code and detail.
    enum Outcome: Equatable {
        case feed(ParsedFeed)
        case failure(DepotError.Code, String?)

        init(_ body: () throws -> ParsedFeed) {
            do {
                self = .feed(try body())
            } catch let error as DepotError {
                self = .failure(error.code, error.detail)
            } catch {
                self = .failure(.processing, "\(error)")
            }
        }
    }

    func whole(_ data: Data) -> Outcome {
        Outcome { try FeedParser.parse(data, baseURL: forumFeedURL) }
    }

    /// Pushes `data` `size` bytes at a time; `fedAll` says whether every chunk went in before a failure.
    func pushed(_ data: Data, size: Int, fedAll: inout Bool) -> Outcome {
        var fed = false
        let outcome = Outcome {
            var items: [ParsedItem] = []
            let parser = FeedParser.Incremental(baseURL: forumFeedURL, batchSize: 7) { items += $0 }
            var offset = 0
            while offset < data.count {
                try parser.feed(data.subdata(in: offset..<min(data.count, offset + size)))
                offset += size
            }
            fed = true
            let summary = try parser.finish()
            return ParsedFeed(title: summary.title, items: items, skippedItems: summary.skippedItems)
        }
        fedAll = fed
        return outcome
    }

    func pushed(_ data: Data, size: Int) -> Outcome {
        var fedAll = false
        return pushed(data, size: size, fedAll: &fedAll)
    }

    static let fixtures = [
        "atom03.xml", "atom10.xml", "atom10-without-links.xml", "rss090.rdf", "rss091.xml", "rss092.xml",
        "rss1.rdf", "rss2.xml", "rss2-changed.xml", "rss2-without-links.xml", "malformed.xml", "truncated.xml",
        "atom03-dates.xml", "rss2-authors.xml", "atom10-authors.xml", "rss1-dublin-core.rdf", "rss2-dublin-core.xml",
        "atom10-titles.xml", "rss2-titles.xml", "atom03-modes.xml",
    ]

    @Test(arguments: fixtures)
    func aFixtureReadsTheSameInAnyChunks(name: String) throws {
        let data = try fixtureData(name)
        let expected = whole(data)
        for size in [1, 2, 3, 5, 64, 255, 4096, data.count] {
            #expect(pushed(data, size: size) == expected, "\(name) in chunks of \(size)")
        }
    }

    @Test func charactersSplitAcrossChunksReadWhole() throws {
        // Two-, three- and four-byte characters, cut at every offset by 1-byte chunks
        let document = rss("<item><title>Café ☕ 𝄞 ünïcödé</title><link>/a</link></item><item><title>€ ✓</title><link>/b</link></item>")
        let data = Data(document.utf8)
        let expected = whole(data)
        guard case .feed(let feed) = expected else {
            Issue.record("the document must parse: \(expected)")
            return
        }
        #expect(feed.items.map(\.title) == ["Café ☕ 𝄞 ünïcödé", "€ ✓"])
        for size in 1...5 { #expect(pushed(data, size: size) == expected) }
    }

    @Test func bytesThatAreNotUTF8FailWhereTheyAre() {
        // A stray continuation byte inside a title, and a character cut off at the very end
        var stray = Data(rss("<item><title>Caf").utf8)
        stray.append(0x80)
        stray.append(contentsOf: Data("</title><link>/a</link></item>".utf8) + Data(String(repeating: " ", count: 300).utf8))
        var cut = Data(rss("<item><title>T</title><link>/a</link></item>").utf8)
        cut.append(contentsOf: [0xE2, 0x98])
        for data in [stray, cut] {
            let expected = whole(data)
            guard case .failure(let code, let detail) = expected else {
                Issue.record("must fail: \(expected)")
                continue
            }
            #expect(code == .decoding)
            #expect(detail?.contains("not valid UTF-8") == true)
            for size in [1, 2, 3, 100, data.count] { #expect(pushed(data, size: size) == expected, "chunks of \(size)") }
        }
    }

    @Test func entityExpansionFailsFastInChunks() {
        // Billion laughs, and a quadratic blowup whose references come long before the end
        for document in [HostileFeeds.billionLaughs, HostileFeeds.quadraticBlowup] {
            var fedAll = true
            let outcome = pushed(Data(document.utf8), size: 512, fedAll: &fedAll)
            guard case .failure(let code, let detail) = outcome else {
                Issue.record("must fail: \(outcome)")
                continue
            }
            // Never expanded: the first reference is an undeclared entity, and the
            // parse stops at the chunk that holds it
            #expect(code == .decoding)
            #expect(detail?.contains("libxml2 error 26") == true, "\(String(describing: detail))")
            #expect(!fedAll)
        }
    }

    @Test func anEmptyDocumentFailsAsAWholeOneDoes() {
        let parser = FeedParser.Incremental(baseURL: forumFeedURL) { _ in }
        let error = #expect(throws: DepotError.self) { try parser.finish() }
        #expect(error?.code == .decoding)
        #expect(error?.detail == "the feed is empty")
    }
}
