import Depot
import DepotStore
import DepotTesting
import Foundation
import GRDB
import Testing
@testable import NerdfeedKit

/// Feeds past libxml2's one-chunk limit, parsed and merged batch by batch.
@Suite struct LargeFeedTests {
    /// An RSS document of `count` items, `/posts/N` each, with `padding` bytes of description.
    static func rss(items count: Int, padding: Int = 0, title: (Int) -> String = { "Post \($0)" }, breakAt broken: Int? = nil) -> Data {
        let filler = String(repeating: "x", count: padding)
        var xml = #"<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Large</title>"#
        for index in 0..<count {
            if index == broken { xml += "<item><title>a bare & here</title></item>" }
            xml += "<item><title>\(title(index))</title><link>/posts/\(index)</link><description>\(filler)</description></item>\n"
        }
        return Data((xml + "</channel></rss>").utf8)
    }

    @Test func aFeedPastTenMillionBytesParsesInBatches() throws {
        // Given an 11 MB feed: libxml2 refuses more than 10,000,000 bytes in one chunk
        let data = Self.rss(items: 2_000, padding: 5_500)
        #expect(data.count > 11_000_000)

        // When it is parsed in batches of 500
        var batches: [[ParsedItem]] = []
        let summary = try FeedParser.parse(data, baseURL: forumFeedURL, batchSize: 500) { batches.append($0) }

        // Then every item arrives, in order, 500 at a time
        #expect(summary.title == "Large")
        #expect(summary.items == 2_000)
        #expect(batches.map(\.count) == [500, 500, 500, 500])
        let links = batches.flatMap { $0.compactMap(\.link) }
        #expect(links == (0..<2_000).map { "https://forums.example.com/posts/\($0)" })
        #expect(try FeedParser.parse(data, baseURL: forumFeedURL).items.count == 2_000)
    }

    @Test func aReceiverThatThrowsStopsTheParser() throws {
        struct Full: Error {}
        var calls = 0
        #expect(throws: Full.self) {
            try FeedParser.parse(Self.rss(items: 50), baseURL: forumFeedURL, batchSize: 10) { _ in
                calls += 1
                throw Full()
            }
        }
        #expect(calls == 1)
    }

    @Test func anAtomAuthorNamedAfterTheEntriesStillReachesThem() throws {
        let entries = (1...5).map { "<entry><title>E\($0)</title><link href=\"https://a.example/\($0)\"/></entry>" }.joined()
        let xml = #"<feed xmlns="http://www.w3.org/2005/Atom"><title>T</title>"# + entries
            + "<entry><title>Own</title><link href=\"https://a.example/own\"/><author><name>Someone</name></author></entry>"
            + "<author><name>Feed Author</name></author></feed>"
        var batches: [[ParsedItem]] = []
        try FeedParser.parse(Data(xml.utf8), baseURL: forumFeedURL, batchSize: 100) { batches.append($0) }
        let items = batches.flatMap { $0 }
        #expect(items.map(\.author) == Array(repeating: "Feed Author", count: 5) + ["Someone"])
        #expect(items.map(\.title) == ["E1", "E2", "E3", "E4", "E5", "Own"])
    }

    @Test func entityExpansionStaysBounded() throws {
        for document in [HostileFeeds.billionLaughs, HostileFeeds.quadraticBlowup] {
            // Entities a feed declares are never expanded: a reference to one is undeclared.
            let error = #expect(throws: DepotError.self) { try FeedParser.parse(Data(document.utf8), baseURL: forumFeedURL) }
            #expect(error?.code == .decoding)
            #expect(error?.detail?.contains("libxml2 error 26") == true, "undeclared entity: \(String(describing: error))")
        }
    }

    @Test func externalEntitiesAreNeverLoaded() throws {
        // A file only this test knows, named by an external entity and by an external DTD.
        let secret = "secret-\(UUID().uuidString)"
        let file = FileManager.default.temporaryDirectory.appending(path: "xxe-\(UUID().uuidString).txt")
        try Data(secret.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let general = #"<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY xxe SYSTEM ""# + file.absoluteString + #"">]>"#
            + #"<rss version="2.0"><channel><item><title>&xxe;</title><link>/a</link></item></channel></rss>"#
        let parameter = #"<?xml version="1.0"?><!DOCTYPE rss [<!ENTITY % xxe SYSTEM ""# + file.absoluteString + #""> %xxe;]>"#
            + #"<rss version="2.0"><channel><item><title>T</title><link>/a</link></item></channel></rss>"#
        let dtd = #"<?xml version="1.0"?><!DOCTYPE rss SYSTEM ""# + file.absoluteString + #"">"#
            + #"<rss version="2.0"><channel><item><title>T &amp; U</title><link>/a</link></item></channel></rss>"#
        for document in [general, parameter, dtd] {
            do {
                let feed = try FeedParser.parse(Data(document.utf8), baseURL: forumFeedURL)
                #expect(!feed.items.contains { $0.title.contains(secret) }, "\(document)")
            } catch {
                #expect(error.code == .decoding)
                #expect(!"\(error)".contains(secret))
            }
        }
        // The external DTD is not read, and the feed still is.
        #expect(try FeedParser.parse(Data(dtd.utf8), baseURL: forumFeedURL).items.map(\.title) == ["T & U"])
    }

    // MARK: - Merging as it parses

    func perform(_ data: Data, in store: Store) async throws -> FeedMerge? {
        let file = FileManager.default.temporaryDirectory.appending(path: "large-feed-\(UUID().uuidString).xml")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try await StoreFixtures.perform(FetchForumFeed(url: forumFeedURL), respondingWith: file, in: store).written
    }

    @Test func anIdentityListedTwiceAcrossBatchesKeepsItsFirstItemWhetherNewOrKnown() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            // Given a feed whose first sync had 10 posts
            #expect(try await perform(Self.rss(items: 10), in: store) == FeedMerge(inserted: 10, updated: 0, unchanged: 0))

            // When it lists 2,500 (three batches): post 5, known, comes again in the third batch as
            // "Post 5 again", and post 2,100 in the third batch takes the link of post 1,500, new
            let rss = String(decoding: Self.rss(items: 2_500) { $0 == 2_100 ? "Second 1500" : $0 == 2_200 ? "Post 5 again" : "Renamed \($0)" }, as: UTF8.self)
                .replacingOccurrences(of: "<link>/posts/2100</link>", with: "<link>/posts/1500</link>")
                .replacingOccurrences(of: "<link>/posts/2200</link>", with: "<link>/posts/5</link>")
            let merge = try await perform(Data(rss.utf8), in: store)

            // Then each keeps what its first listing said, and each counts once
            #expect(try await store.item("https://forums.example.com/posts/5")?.title == "Renamed 5")
            #expect(try await store.item("https://forums.example.com/posts/1500")?.title == "Renamed 1500")
            #expect(merge == FeedMerge(inserted: 2_488, updated: 10, unchanged: 0))
            #expect(try await store.allItems().count == 2_498)
        }
    }

    @Test func aLargeFeedMergesBatchByBatchAndABreakLaterRollsAllBack() async throws {
        try await StoreFixtures.withStore(migrator: NerdfeedSchema.migrator) { store in
            // Given 2,500 items merged (three batches); the link of item 7 comes again
            // in the third batch with another title: the first one wins.
            let first = Self.rss(items: 2_500) { $0 == 2_100 ? "Post 7 again" : "Post \($0)" }
            let duplicated = String(decoding: first, as: UTF8.self).replacingOccurrences(of: "<link>/posts/2100</link>", with: "<link>/posts/7</link>")
            #expect(try await perform(Data(duplicated.utf8), in: store) == FeedMerge(inserted: 2_499, updated: 0, unchanged: 0))
            #expect(try await store.item("https://forums.example.com/posts/7")?.title == "Post 7")

            // When a newer feed renames every post but breaks after its second batch
            let broken = Self.rss(items: 2_500, title: { "Renamed \($0)" }, breakAt: 2_200)
            let error = await #expect(throws: DepotError.self) { try await perform(broken, in: store) }

            // Then it fails as malformed, and the batches already merged are rolled back
            #expect(error?.code == .decoding)
            let items = try await store.allItems()
            #expect(items.count == 2_499)
            #expect(items.allSatisfy { $0.title.hasPrefix("Post ") })

            // And the same feed unbroken updates every post
            #expect(try await perform(Self.rss(items: 2_500, title: { "Renamed \($0)" }), in: store) == FeedMerge(inserted: 1, updated: 2_499, unchanged: 0))
        }
    }
}

/// Documents Foundation's `XMLParser` died on (the fuzzers found them) are answered, not fatal.
@Suite struct HostileEncodingTests {
    @Test func aProcessingInstructionWithoutDataParses() throws {
        let xml = #"<rss version="2.0"><channel><title>T</title><?pi?><item><title>A</title><link>/a</link></item></channel></rss>"#
        let feed = try FeedParser.parse(Data(xml.utf8), baseURL: forumFeedURL)
        #expect(feed.items.map(\.title) == ["A"])
    }

    @Test func aDeclarationWithABadVersionIsReadAsUTF8() throws {
        let bytes = Array(#"<?xml version="1.<x0" encoding="ISO-8859-1"?><rss><channel><title>"#.utf8) + [0xFF] + Array("</title></channel></rss>".utf8)
        #expect(FeedEncoding.declaredEncoding(bytes) == nil)
        let error = #expect(throws: DepotError.self) { try FeedParser.parse(Data(bytes), baseURL: forumFeedURL) }
        #expect(error?.code == .decoding)
        #expect(error?.detail?.contains("not valid UTF-8") == true)
    }
}

extension HostileEncodingTests {
    @Test func anEncodingNameThatIsNotOneIsReadAsUTF8() throws {
        let bytes = Array(#"<?xml version="1.0" encoding="ut"#.utf8) + [0xFF, 0xFF] + Array(#"-8"?><rss><channel><title>T</title></channel></rss>"#.utf8)
        #expect(FeedEncoding.declaredEncoding(bytes) == nil)
        let error = #expect(throws: DepotError.self) { try FeedParser.parse(Data(bytes), baseURL: forumFeedURL) }
        #expect(error?.code == .decoding)
    }
}
