#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// A feed far past libxml2's 10,000,000-byte chunk limit, synced by the
/// release `nerdfeed` as a user runs it: 1,000,000 items in about 34 MB of RSS,
/// served over loopback by `depot-bench serve`. Reports the sync's time and
/// peak RSS against `XMLParser` alone reading the same bytes in this process.
enum BigFeedBench {
    /// An RSS 2.0 document of `items` minimal items (a relative link each, so
    /// every one is kept), about 34 bytes an item.
    static func document(items: Int) -> Data {
        var xml = #"<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Big</title>"#
        xml += "\n"
        xml.reserveCapacity(items * 36 + 200)
        for index in 0..<items { xml += "<item><link>/i/\(index)</link></item>\n" }
        xml += "</channel></rss>\n"
        return Data(xml.utf8)
    }

    /// Counts elements and nothing else: the floor any feed parser built on XMLParser pays.
    final class CountingDelegate: NSObject, XMLParserDelegate {
        var elements = 0
        func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
            elements += 1
        }
    }

    /// `XMLParser` alone over `data`, chunked as FeedParser feeds it; seconds.
    static func parseAlone(_ data: Data) throws -> Double {
        let delegate = CountingDelegate()
        let parser = XMLParser(stream: InputStream(data: data))
        parser.shouldProcessNamespaces = true
        parser.delegate = delegate
        let start = ContinuousClock.now
        guard parser.parse() else { throw CocoaError(.coderReadCorrupt, userInfo: [NSLocalizedDescriptionKey: "XMLParser failed: \(String(describing: parser.parserError))"]) }
        return (ContinuousClock.now - start).seconds
    }

    static func run(binaries: String, items: Int, repeats: Int) async throws {
        let nerdfeed = "\(binaries)/nerdfeed"
        let folder = FileManager.default.temporaryDirectory.appending(path: "bigfeed-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let data = document(items: items)
        let file = folder.appending(path: "feed.xml")
        try data.write(to: file)
        let server = try ServerProcess.start(arguments: ["serve", file.path])
        defer { server.stop() }
        let feed = "http://127.0.0.1:\(server.port)/feed.xml"
        say(String(format: "bigfeed: %d items, %.1f MB of RSS, served at %@; nerdfeed from %@", items, Double(data.count) / 1e6, feed, binaries))

        var syncs: [NerdfeedBench.Measurement] = []
        var alone: [Double] = []
        var floors: [Double] = []
        for run in 0..<max(1, repeats) {
            // Alternate, so both see the same machine.
            alone.append(try parseAlone(data))
            let cache = folder.appending(path: "sync-\(run).sqlite").path
            // --songs at the same server: its answer fails the songs sync, so the
            // run's exit status is not checked; the feed's rows are counted instead.
            // --keep: every item stays (the app keeps the newest 1,000 by default and evicts the rest before it exits).
            let measurement = try NerdfeedBench.measure(nerdfeed, ["--once", "--limit", "3", "--keep", "\(items)", "--feed", feed, "--songs", "http://127.0.0.1:\(server.port)", "--cache", cache], requireSuccess: false, peakRSS: true)
            let rows = try NerdfeedBench.measure("/usr/bin/sqlite3", [cache, "SELECT COUNT(*) FROM feedItem"], capture: true).output
            guard rows.trimmingCharacters(in: .whitespacesAndNewlines) == "\(items)" else {
                throw CocoaError(.coderReadCorrupt, userInfo: [NSLocalizedDescriptionKey: "the sync stored \(rows.trimmingCharacters(in: .whitespacesAndNewlines)) rows, not \(items)"])
            }
            syncs.append(measurement)
            floors.append(try insertFloor(schemaFrom: cache, items: items, feed: feed, folder: folder, run: run))
            say(String(format: "  run %d: nerdfeed --once %.2f s, peak RSS %d MB; XMLParser alone %.2f s; sqlite3 inserting the same rows %.2f s",
                       run + 1, measurement.seconds, measurement.peakRSSKilobytes / 1024, alone.last!, floors.last!))
        }
        let sync = NerdfeedBench.median(syncs.map(\.seconds))
        let parse = NerdfeedBench.median(alone)
        let floor = NerdfeedBench.median(floors)
        let rss = syncs.map(\.peakRSSKilobytes).max()! / 1024
        say(String(format: "sync of %d items (%.1f MB): %.2f s (median of %d), %.2fx XMLParser alone (%.2f s; target <= 1.5x), %.2fx sqlite3 inserting the rows (%.2f s); peak RSS %d MB (worst; target < 150 MB)",
                   items, Double(data.count) / 1e6, sync, syncs.count, sync / parse, parse, sync / floor, floor, rss))
        let count = SummaryRow.grouped(Double(items))
        SummaryRow.print([
            SummaryRow(String(format: "bigfeed: sync of %@ items (%.1f MB RSS feed), peak RSS", count, Double(data.count) / 1e6), target: "< 150 MB", "\(rss) MB", met: rss < 150),
            SummaryRow("bigfeed: sync time of \(count) items vs `XMLParser` alone on the same bytes", target: "≤ 1.5× `XMLParser`",
                       String(format: "%.2f s median, %@ (%.2f s)", sync, SummaryRow.times(sync / parse), parse), met: sync / parse <= 1.5),
            SummaryRow("bigfeed: `sqlite3` inserting the same \(count) rows; sync vs that",
                       String(format: "%.2f s (%@ `XMLParser`); sync %@", floor, SummaryRow.times(floor / parse), SummaryRow.times(sync / floor))),
        ])
    }

    /// The write alone, as fast as SQLite does it: the `sqlite3` shell makes
    /// `feedItem` as the synced cache has it (its indexes too) in a new WAL
    /// file and inserts the same rows (feed, id, link, title), generated by
    /// SQL, in one transaction. Seconds, process start included (about 1 ms).
    static func insertFloor(schemaFrom cache: String, items: Int, feed: String, folder: URL, run: Int) throws -> Double {
        let schema = try NerdfeedBench.measure("/usr/bin/sqlite3", [cache, "SELECT sql || ';' FROM sqlite_master WHERE tbl_name = 'feedItem' AND sql IS NOT NULL"], capture: true).output
        let base = feed.replacingOccurrences(of: "/feed.xml", with: "")
        let script = """
            PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
            \(schema)
            BEGIN;
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(items - 1))
            INSERT INTO feedItem (feed, id, link, title, isRead)
            SELECT '\(feed)', '\(base)/i/' || i, '\(base)/i/' || i, '\(base)/i/' || i, 0 FROM n;
            COMMIT;
            """
        let file = folder.appending(path: "floor-\(run).sqlite").path
        return try NerdfeedBench.measure("/usr/bin/sqlite3", [file, script], capture: true).seconds
    }
}
