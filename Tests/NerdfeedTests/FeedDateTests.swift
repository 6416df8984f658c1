import Foundation
import Testing
@testable import NerdfeedKit

/// The dates feeds write: RFC 822 with its real-world variants, and ISO 8601 / W3C-DTF.
@Suite struct FeedDateTests {
    @Test func atom03EntriesAreDatedByIssuedElseCreatedElseModified() throws {
        let feed = try FeedParser.parse(try fixtureData("atom03-dates.xml"), baseURL: URL(string: "http://dates.example.net/atom.xml")!)

        #expect(feed.items.map(\.published) == [
            utc("2004-04-01T13:00:00Z"),  // issued, its offset applied
            utc("2004-04-02T10:00:00Z"),  // modified alone
            utc("2004-04-03T10:00:00Z"),  // created alone
            utc("2004-04-04T12:00:00Z"),  // issued wins, though it comes last
            utc("2004-04-06T09:30:00Z"),  // created over modified, though it comes after
            utc("2004-04-08T12:00:00Z"),  // no zone: read as UTC
            utc("2004-04-09T18:45:00Z"),  // issued unreadable: modified
        ])
    }

    @Test(arguments: [
        // RFC 822 / 2822 as written
        ("Tue, 10 Jun 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("10 Jun 2003 04:00:00 +0000", "2003-06-10T04:00:00Z"),
        ("Tuesday, 10 Jun 2003 04:00:00 -0700", "2003-06-10T11:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 +05:30", "2003-06-09T22:30:00Z"),
        ("Tue, 10 Jun 2003 04:00:00 +0000 (UTC)", "2003-06-10T04:00:00Z"),  // a comment after the zone
        // Two- and three-digit years (RFC 2822 §4.3: 00–49 are 2000–2049)
        ("Tue, 10 Jun 03 04:00 EST", "2003-06-10T09:00:00Z"),
        ("Thu, 10 Jun 99 04:00:00 UT", "1999-06-10T04:00:00Z"),
        ("Sat, 01 Jan 49 00:00:00 GMT", "2049-01-01T00:00:00Z"),
        ("Sun, 01 Jan 50 00:00:00 GMT", "1950-01-01T00:00:00Z"),
        ("Fri, 10 Jun 103 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        // Missing seconds, missing time, missing zone, missing weekday
        ("Tue, 10 Jun 2003 04:00 GMT", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Jun 2003 4:05 GMT", "2003-06-10T04:05:00Z"),
        ("Tue, 10 Jun 2003", "2003-06-10T00:00:00Z"),
        ("Tue, 10 Jun 2003 04:00:00", "2003-06-10T04:00:00Z"),
        ("10 Jun 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        // Spellings seen in the wild
        ("Tue, 10 June 2003 04:00:00 Z", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Jun. 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("Tue, 10 Sept 2003 04:00:00 GMT", "2003-09-10T04:00:00Z"),
        ("Tue, Jun 10 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("tue, 10 jun 2003 04:00:00 gmt", "2003-06-10T04:00:00Z"),
        ("Tue,10 Jun 2003 04:00:00 GMT", "2003-06-10T04:00:00Z"),
        ("  Tue, 10 Jun 2003 04:00:00 GMT\n", "2003-06-10T04:00:00Z"),
        // Named zones: RFC 822's, and others feeds use
        ("Sat, 1 Jan 2005 00:00:00 PDT", "2005-01-01T07:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 PST", "2005-01-01T08:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 EDT", "2005-01-01T04:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 CST", "2005-01-01T06:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 MDT", "2005-01-01T06:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 UTC", "2005-01-01T00:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 CEST", "2004-12-31T22:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 IST", "2004-12-31T18:30:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 ACST", "2004-12-31T14:30:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 NZDT", "2004-12-31T11:00:00Z"),
        // Military letters: RFC 2822 reads all but Z as an unknown offset, UTC
        ("Sat, 1 Jan 2005 00:00:00 A", "2005-01-01T00:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 M", "2005-01-01T00:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 Y", "2005-01-01T00:00:00Z"),
        ("Sat, 1 Jan 2005 00:00:00 z", "2005-01-01T00:00:00Z"),
        // An unknown zone name: a date a few hours off rather than none
        ("Sat, 1 Jan 2005 00:00:00 XYZT", "2005-01-01T00:00:00Z"),
        // ISO 8601 / RFC 3339 / W3C-DTF
        ("2003-12-13T18:30:02Z", "2003-12-13T18:30:02Z"),
        ("2003-12-13t18:30:02z", "2003-12-13T18:30:02Z"),
        ("2003-12-13T18:30:02.25Z", "2003-12-13T18:30:02.250Z"),
        ("2003-12-13T18:30:02,5Z", "2003-12-13T18:30:02.500Z"),
        ("2003-12-13T18:30:02.125000000Z", "2003-12-13T18:30:02.125Z"),
        ("2003-12-13T18:30:02+01:00", "2003-12-13T17:30:02Z"),
        ("2003-12-13T18:30:02+0100", "2003-12-13T17:30:02Z"),
        ("2003-12-13T18:30:02+01", "2003-12-13T17:30:02Z"),
        ("2003-12-13T18:30:02.500-05:00", "2003-12-13T23:30:02.500Z"),
        ("2003-12-13T18:30Z", "2003-12-13T18:30:00Z"),
        ("2003-12-13T18:30+05:30", "2003-12-13T13:00:00Z"),
        ("2003-12-13T18:30:02", "2003-12-13T18:30:02Z"),
        ("2003-12-13 18:30:02", "2003-12-13T18:30:02Z"),
        ("2003-12-13 18:30:02 +0100", "2003-12-13T17:30:02Z"),
        ("2003-12-13 18:30 GMT", "2003-12-13T18:30:00Z"),
        ("2003-12-13", "2003-12-13T00:00:00Z"),
        ("2003-12", "2003-12-01T00:00:00Z"),
        ("2003", "2003-01-01T00:00:00Z"),
        // Calendar edges
        ("2004-02-29T12:00:00Z", "2004-02-29T12:00:00Z"),
        ("2000-02-29", "2000-02-29T00:00:00Z"),
        ("2003-12-31T23:59:60Z", "2004-01-01T00:00:00Z"),  // a leap second
        ("9999-12-31T23:59:59Z", "9999-12-31T23:59:59Z"),
        ("Fri, 31 Dec 9999 18:00:00 -0500", "9999-12-31T23:00:00Z"),
    ])
    func readableDates(_ text: String, _ expected: String) {
        #expect(FeedDate.parse(text) == utc(expected), "\(text)")
    }

    @Test func theFirstDayOfYearOneIsProlepticGregorian() {
        // Foundation's formatters switch to the Julian calendar before 1582; feeds do not.
        #expect(FeedDate.parse("0001-01-01T00:00:00Z") == Date(timeIntervalSince1970: -62_135_596_800))
    }

    @Test(arguments: [
        "", "   ", "sometime last week", "Tue, 31 Feb 2003 04:00:00 GMT", "Tue, 10 Foo 2003 04:00:00 GMT",
        "Blursday, 10 Jun 2003 04:00:00 GMT", "Tue, 10 Jun 2003 25:00:00 GMT", "Tue, 10 Jun 2003 04:00:00 +99",
        "Tue, 10 Jun 2003 04:00:00 Not-A-Zone", "Tue, 10 Jun 20003 04:00:00 GMT", "Tue, 10 Jun", "Tue, 10 Jun 2003 4",
        "2003-13-01", "2003-12-13T25:00:00Z", "2003-12-13T18:30:02+0", "2003-12-13T18:30:02Zjunk", "2005-02-29",
        "1900-02-29", "2003-12-13T18", "2003-12-13T18:30:02.Z", "2003-12-13 18:30:02 nowhere", "03-12-13",
        "12/13/2003", "1070000000",
        // Valid where written, but in UTC in year 10000 or year 0: the cache cannot store them.
        "Fri, 31 Dec 9999 23:00:00 -0500", "9999-12-31T23:00:00-05:00", "9999-12-31T23:59:60Z", "0001-01-01T00:30:00+01:00",
    ])
    func garbageDatesAreNil(_ text: String) {
        #expect(FeedDate.parse(text) == nil, "\(text)")
    }
}
