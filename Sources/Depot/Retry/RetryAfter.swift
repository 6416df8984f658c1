import Foundation

/// Reads the `Retry-After` header (RFC 9110 §10.2.3): delay-seconds or an HTTP date.
///
/// For example:
///
/// ```swift
/// RetryAfter.delay("120", now: now)                              // 120 s
/// RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: now)    // the time until then, or 0 if past
/// ```
package enum RetryAfter {
    /// The delay a `Retry-After` value asks for, measured from `now`; `nil` when it cannot be read.
    /// A date in the past gives zero.
    ///
    /// - Parameters:
    ///   - value: The header value.
    ///   - now: The wall-clock time the response arrived.
    package static func delay(_ value: String, now: Date) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.allSatisfy({ $0.isASCII && $0.isNumber }) {
            guard let seconds = Int64(trimmed) else { return .seconds(Int64.max / 1_000_000_000_000) }
            return .seconds(seconds)
        }
        guard let date = httpDate(trimmed, now: now) else { return nil }
        let interval = date.timeIntervalSince(now)
        return interval <= 0 ? .zero : .milliseconds(Int64((interval * 1000).rounded(.up)))
    }

    /// Parses an HTTP date: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the
    /// obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) or asctime
    /// (`Sun Nov  6 08:49:37 1994`).
    ///
    /// - Parameters:
    ///   - text: The date as sent.
    ///   - now: For RFC 850's two-digit years: the year with those last two digits that is at most
    ///     50 years ahead of `now`'s (RFC 9110 §5.6.7), so in 2080 `30` is 2130 and `31` is 2031.
    package static func httpDate(_ text: String, now: Date = Date(timeIntervalSince1970: 0)) -> Date? {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        // IMF-fixdate: "Sun," "06" "Nov" "1994" "08:49:37" "GMT"
        if words.count == 6, words[0].hasSuffix(","), words[5] == "GMT",
           let day = number(words[1], digits: 2...2), let month = month(words[2]),
           let year = number(words[3], digits: 4...4), let time = clock(words[4]) {
            return date(year: year, month: month, day: day, time: time)
        }
        // RFC 850: "Sunday," "06-Nov-94" "08:49:37" "GMT"
        if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT", let time = clock(words[2]) {
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, let day = number(parts[0], digits: 1...2), let month = month(parts[1]),
                  let shortYear = number(parts[2], digits: 2...2) else { return nil }
            let currentYear = civil(from: Int((now.timeIntervalSince1970 / 86_400).rounded(.down))).year
            // This century's year, else the previous or the next one's: the one at most
            // 50 years ahead and more than 50 years back (in 1994, "26" is 2026, "45" 1945).
            var year = currentYear / 100 * 100 + shortYear
            if year > currentYear + 50 {
                year -= 100
            } else if year <= currentYear - 50 {
                year += 100
            }
            return date(year: year, month: month, day: day, time: time)
        }
        // asctime: "Sun" "Nov" "6" "08:49:37" "1994"
        if words.count == 5, let month = month(words[1]), let day = number(words[2], digits: 1...2),
           let time = clock(words[3]), let year = number(words[4], digits: 4...4) {
            return date(year: year, month: month, day: day, time: time)
        }
        return nil
    }

    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// The value of `text` if it is only ASCII digits, as many as `digits` allows: no sign,
    /// which `Int(_:)` would take (`"+7"`, `"-1"`).
    private static func number(_ text: some StringProtocol, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.utf8.count),
              text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text)
    }

    private static func month(_ name: String) -> Int? {
        months.firstIndex(of: name.lowercased()).map { $0 + 1 }
    }

    private static func clock(_ text: String) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let h = number(parts[0], digits: 2...2), let m = number(parts[1], digits: 2...2),
              let s = number(parts[2], digits: 2...2),
              h < 24, m < 60, s <= 60 else { return nil }
        return h * 3600 + m * 60 + s
    }

    private static func date(year: Int, month: Int, day: Int, time: Int) -> Date? {
        guard (1...31).contains(day), year >= 1900 else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        guard civil(from: days) == (year, month, day) else { return nil }  // 31 Feb and the like
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + time))
    }

    /// Days since 1970-01-01 (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civil(from days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
