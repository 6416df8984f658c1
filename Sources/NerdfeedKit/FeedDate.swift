import Foundation

/// Reads the dates feeds carry: RFC 822 (RSS 2.0's `pubDate`) and RFC 3339 /
/// ISO 8601 (Atom, `dc:date`), in the loose forms real feeds use.
///
/// Hand-written rather than `DateFormatter`: one formatter per format is slow to
/// make, a feed mixes formats, and the loose cases (no weekday, two-digit years,
/// named zones, an ISO date in `pubDate`) each need a formatter of their own.
/// Garbage gives `nil`, never a wrong date.
///
/// `package` so that the fuzz targets (`Fuzz/Targets`) can reach it.
package enum FeedDate {
    /// The date in `text`, in any of the formats feeds use, or `nil`.
    package static func parse(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        return rfc822(trimmed) ?? iso8601(trimmed)
    }

    // MARK: - RFC 822 / RFC 2822

    /// `[Tue,] 10 Jun 2003 04:00:00 GMT`, with 2-, 3- or 4-digit years,
    /// optional seconds, an optional time (midnight), a month spelled out or
    /// abbreviated with a dot (`June`, `Jun.`), and numeric (`+0000`, `-05:00`),
    /// named (`GMT`, `UT`, `EST`, `PDT`, …) or military (`Z`, `A`…`Y`) zones.
    /// A missing zone is read as GMT.
    static func rfc822(_ text: String) -> Date? {
        var tokens = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "," })
            .map(String.init)
        // An optional weekday, possibly spelled out ("Tuesday").
        if let first = tokens.first, first.first?.isLetter == true, month(first) == nil {
            guard weekdays.contains(where: { first.lowercased().hasPrefix($0) }) else { return nil }
            tokens.removeFirst()
        }
        guard tokens.count >= 3 else { return nil }
        // "10 Jun 2003" and, seen in the wild, "Jun 10 2003".
        let day: Int
        let monthNumber: Int
        if let d = Int(tokens[0]), let m = month(tokens[1]) {
            day = d
            monthNumber = m
        } else if let m = month(tokens[0]), let d = Int(tokens[1]) {
            day = d
            monthNumber = m
        } else {
            return nil
        }
        guard tokens[2].allSatisfy(\.isNumber), var year = Int(tokens[2]) else { return nil }
        switch tokens[2].count {
        case 2: year += year < 50 ? 2000 : 1900  // RFC 2822 §4.3
        case 3: year += 1900
        case 4: break
        default: return nil
        }
        // No time at all ("10 Jun 2003"), seen in the wild: midnight GMT.
        guard tokens.count > 3 else {
            return makeDate(year: year, month: monthNumber, day: day, hour: 0, minute: 0, second: 0, fraction: 0, offsetSeconds: 0)
        }
        let time = tokens[3].split(separator: ":", omittingEmptySubsequences: false)
        guard time.count == 2 || time.count == 3,
              let hour = Int(time[0]), let minute = Int(time[1]),
              time[0].count <= 2, time[1].count == 2 else { return nil }
        var second = 0
        if time.count == 3 {
            guard time[2].count == 2, let s = Int(time[2]) else { return nil }
            second = s
        }
        var offset = 0
        if tokens.count > 4 {
            guard let zone = zoneOffset(tokens[4]) else { return nil }
            offset = zone
        }
        return makeDate(year: year, month: monthNumber, day: day, hour: hour, minute: minute, second: second, fraction: 0, offsetSeconds: offset)
    }

    private static let weekdays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// 1...12 for a month name or its first three letters ("Sept" and "Jun." too).
    private static func month(_ token: String) -> Int? {
        var lower = token.lowercased()
        if lower.hasSuffix(".") { lower.removeLast() }
        guard lower.count >= 3, lower.allSatisfy(\.isLetter) else { return nil }
        return months.firstIndex(of: String(lower.prefix(3))).map { $0 + 1 }
    }

    /// Seconds east of UTC for `+0000`, `-05:00`, `GMT`, `EST` and friends.
    static func zoneOffset(_ token: String) -> Int? {
        if let sign = token.first, sign == "+" || sign == "-" {
            let digits = token.dropFirst().filter { $0 != ":" }
            guard digits.count == 4 || digits.count == 2, digits.allSatisfy(\.isNumber), let value = Int(digits) else { return nil }
            let hours = digits.count == 4 ? value / 100 : value
            let minutes = digits.count == 4 ? value % 100 : 0
            guard hours < 24, minutes < 60 else { return nil }
            return (sign == "-" ? -1 : 1) * (hours * 3600 + minutes * 60)
        }
        if let minutes = namedZones[token.uppercased()] { return minutes * 60 }
        // A military letter: RFC 822 got their signs backwards, so RFC 2822
        // §4.3 reads every one but Z as "-0000", an unknown offset: UTC.
        if token.count == 1, let letter = token.first, letter.isASCII, letter.isLetter { return 0 }
        // An unknown zone name: better a date a few hours off than no date at all.
        guard (2...5).contains(token.count), token.allSatisfy({ $0.isASCII && $0.isUppercase }) else { return nil }
        return 0
    }

    /// RFC 822's zones, plus those feeds use although the RFC does not list
    /// them, in minutes east of UTC.
    private static let namedZones: [String: Int] = [
        "GMT": 0, "UT": 0, "UTC": 0, "Z": 0, "WET": 0,
        "EST": -300, "EDT": -240, "CST": -360, "CDT": -300, "MST": -420, "MDT": -360, "PST": -480, "PDT": -420,
        "AST": -240, "ADT": -180, "NST": -210, "NDT": -150, "AKST": -540, "AKDT": -480, "HST": -600,
        "BST": 60, "IST": 330, "CET": 60, "CEST": 120, "MET": 60, "MEST": 120, "WEST": 60, "EET": 120, "EEST": 180,
        "MSK": 180, "HKT": 480, "SGT": 480, "JST": 540, "KST": 540,
        "ACST": 570, "ACDT": 630, "AEST": 600, "AEDT": 660, "AWST": 480, "NZST": 720, "NZDT": 780,
    ]

    // MARK: - RFC 3339 / ISO 8601 / W3C-DTF

    /// `2003-12-13T18:30:02Z`, `2003-12-13T18:30:02.25+01:00`, `2003-12-13 18:30`,
    /// and the W3C-DTF dates `2003-12-13`, `2003-12`, `2003` (midnight UTC).
    /// The zone is `Z`, `±hh:mm`, `±hhmm` or `±hh`, and may follow a space
    /// (`2003-12-13 18:30:02 +0100`, `2003-12-13 18:30 GMT`).
    /// A date-time without a zone is read as UTC.
    static func iso8601(_ text: String) -> Date? {
        let scalars = Array(text.utf8)
        var i = 0
        func number(_ digits: Int) -> Int? {
            guard i + digits <= scalars.count else { return nil }
            var value = 0
            for k in i..<(i + digits) {
                let c = scalars[k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
            }
            i += digits
            return value
        }
        func take(_ c: UInt8) -> Bool {
            guard i < scalars.count, scalars[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = number(4) else { return nil }
        var month = 1
        var day = 1
        if take(UInt8(ascii: "-")) {
            guard let m = number(2) else { return nil }
            month = m
            if take(UInt8(ascii: "-")) {
                guard let d = number(2) else { return nil }
                day = d
            }
        }
        var hour = 0
        var minute = 0
        var second = 0
        var fraction = 0.0
        var offset = 0
        if i < scalars.count {
            guard take(UInt8(ascii: "T")) || take(UInt8(ascii: "t")) || take(UInt8(ascii: " ")) else { return nil }
            guard let h = number(2), take(UInt8(ascii: ":")), let m = number(2) else { return nil }
            hour = h
            minute = m
            if take(UInt8(ascii: ":")) {
                guard let s = number(2) else { return nil }
                second = s
                if take(UInt8(ascii: ".")) || take(UInt8(ascii: ",")) {
                    let start = i
                    var scale = 0.1
                    while i < scalars.count, scalars[i] >= 0x30, scalars[i] <= 0x39 {
                        fraction += Double(scalars[i] - 0x30) * scale
                        scale /= 10
                        i += 1
                    }
                    guard i > start else { return nil }
                }
            }
            // "2003-12-13 18:30:02 +0100" and "… GMT", seen in pubDate.
            if take(UInt8(ascii: " ")), i < scalars.count, scalars[i] != UInt8(ascii: "+"), scalars[i] != UInt8(ascii: "-") {
                guard let zone = zoneOffset(String(decoding: scalars[i...], as: UTF8.self)) else { return nil }
                offset = zone
                i = scalars.count
            } else if take(UInt8(ascii: "Z")) || take(UInt8(ascii: "z")) {
                offset = 0
            } else if i < scalars.count {
                let sign = scalars[i]
                guard sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") else { return nil }
                i += 1
                guard let zh = number(2) else { return nil }
                _ = take(UInt8(ascii: ":"))
                let zm = number(2) ?? 0
                guard zh < 24, zm < 60 else { return nil }
                offset = (sign == UInt8(ascii: "-") ? -1 : 1) * (zh * 3600 + zm * 60)
            }
        }
        guard i == scalars.count else { return nil }
        return makeDate(year: year, month: month, day: day, hour: hour, minute: minute, second: second, fraction: fraction, offsetSeconds: offset)
    }

    // MARK: - Arithmetic

    /// The instant of a civil date and time at `offsetSeconds` east of UTC, or
    /// `nil` when a field is out of range (February 30th, 25 o'clock).
    static func makeDate(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, fraction: Double, offsetSeconds: Int) -> Date? {
        guard (1...9999).contains(year), (1...12).contains(month),
              (1...daysInMonth(month, year: year)).contains(day),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second) else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        let instant = Double(seconds) + fraction
        // In UTC too the year must have four digits: an offset can carry a date
        // into year 10000 or year 0, which SQLite's date text (and so the cache)
        // cannot hold.
        guard (earliest...latest).contains(instant) else { return nil }
        return Date(timeIntervalSince1970: instant)
    }

    /// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z, in seconds since 1970.
    private static let earliest = Double(daysFromCivil(year: 1, month: 1, day: 1) * 86_400)
    private static let latest = Double(daysFromCivil(year: 9999, month: 12, day: 31) * 86_400 + 86_399)

    private static func daysInMonth(_ month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
