import Foundation
import NerdfeedKit

extension FuzzTargets {
    /// `FeedDate.parse` on arbitrary text (the bytes read as UTF-8, invalid
    /// sequences replaced).
    ///
    /// Invariants: a date it returns lies in the years 1 to 9999 (the cache's
    /// date text has four digits), and it is read back to the same second from
    /// the two forms feeds use most, RFC 3339 (`2003-06-10T04:00:00Z`) and
    /// RFC 822 (`Tue, 10 Jun 2003 04:00:00 GMT`), as this target writes them.
    static func feedDate(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        guard let date = FeedDate.parse(text) else { return }
        let instant = date.timeIntervalSince1970
        check(CivilTime.storableRange.contains(instant), "feed-date",
              "\(text.debugDescription) gave \(instant), outside the years 1 to 9999")
        let second = Int(instant.rounded(.down))
        let civil = CivilTime(secondsSince1970: second)
        for form in [civil.rfc3339, civil.rfc822] {
            let again = FeedDate.parse(form).map { Int($0.timeIntervalSince1970.rounded(.down)) }
            check(again == second, "feed-date",
                  "\(text.debugDescription) gave \(second) s, but its own \(form.debugDescription) reads as \(again.map(String.init) ?? "nil")")
        }
    }
}
