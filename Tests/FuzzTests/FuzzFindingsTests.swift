import Depot
import Foundation
import NerdfeedKit
import Testing

/// What the fuzzers found in Depot's code, fixed, each as the behaviour it
/// should have had. The inputs themselves are in `Fuzz/Crashes/<target>/`,
/// which ``FuzzRegressionTests`` replays.
@Suite struct FuzzFindingsTests {
    /// 1994-11-06 07:49:37 UTC, the `retry-after` target's default arrival.
    let arrival1994 = Date(timeIntervalSince1970: 784_108_177)

    @Test func anRFC850YearUpTo50YearsAheadIsInTheNextCentury() {
        // Given a response in 1994, "26" is 32 years ahead (2026), not 68 back (1926)
        let date2026 = Date(timeIntervalSince1970: 1_795_682_977)  // Thu, 26 Nov 2026 08:49:37 GMT
        #expect(RetryAfter.httpDate("Thursday, 26-Nov-26 08:49:37 GMT", now: arrival1994) == date2026)
        // And "45" would be 51 years ahead: 1945
        let date1945 = Date(timeIntervalSince1970: -760_461_023)  // Mon, 26 Nov 1945 08:49:37 GMT
        #expect(RetryAfter.httpDate("Monday, 26-Nov-45 08:49:37 GMT", now: arrival1994) == date1945)
        // And in 2080, "30" is 2130
        let arrival2080 = Date(timeIntervalSince1970: 3_471_292_800)
        let year2130 = RetryAfter.httpDate("Sunday, 06-Nov-30 08:49:37 GMT", now: arrival2080)
        #expect(year2130 == RetryAfter.httpDate("Sun, 06 Nov 2130 08:49:37 GMT"))
    }

    @Test(arguments: [
        "Thu Nov 26 08:49:+7 2026",
        "Sun, 06 Nov 1994 -1:-1:-1 GMT",
        "Sun, +6 Nov 1994 08:49:37 GMT",
        "Sunday, 06--Nov-94 08:49:37 GMT",
        "Sunday, -6-Nov-94 08:49:37 GMT",
        "Sun Nov +6 08:49:37 1994",
        "Sun, 06 Nov 1994 08::49:37 GMT",
    ])
    func aSignOrAStrayDashInADateIsNotADate(value: String) {
        #expect(RetryAfter.httpDate(value, now: arrival1994) == nil)
        #expect(RetryAfter.delay(value, now: arrival1994) == nil)
    }

    @Test func aLinkWhosePortIsNotDigitsIsDroppedNotKeptAsAbsolute() throws {
        // Given an item whose only link has a "port" that URL refuses (the feed fuzzer's find)
        let xml = #"<rss version="2.0"><channel><item><title>T</title><link>https://example.mailto:co&amp;quot;a?a=1</link></item>"#
            + #"<item><title>U</title><link>https://example.com:8080/u</link></item></channel></rss>"#
        let feed = try FeedParser.parse(Data(xml.utf8), baseURL: URL(string: "https://forums.example.com/rss")!)
        // Then the item stays, without a link, and the good port is kept
        #expect(feed.items.map(\.link) == [nil, "https://example.com:8080/u"])
        #expect(feed.items.map(\.title) == ["T", "U"])
    }
}
