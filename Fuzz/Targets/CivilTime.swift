/// A UTC civil date and time, written out in the forms the date parsers read:
/// the fuzz targets' independent way to check a parsed instant.
///
/// For example:
///
/// ```swift
/// CivilTime(secondsSince1970: 784_111_777).imfFixdate  // "Sun, 06 Nov 1994 08:49:37 GMT"
/// ```
struct CivilTime {
    var year: Int
    var month: Int
    var day: Int
    var hour: Int
    var minute: Int
    var second: Int
    /// 0 for Sunday … 6 for Saturday.
    var weekday: Int

    /// Seconds since 1970 from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z:
    /// the instants whose year has four digits, as the cache's date text needs.
    static let storableRange: ClosedRange<Double> = -62_135_596_800...253_402_300_799

    /// The civil time of a whole second since 1970 (proleptic Gregorian, UTC;
    /// Howard Hinnant's `civil_from_days`).
    init(secondsSince1970 seconds: Int) {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let time = seconds - days * 86_400
        hour = time / 3600
        minute = time % 3600 / 60
        second = time % 60
        weekday = ((days % 7) + 7 + 4) % 7  // 1970-01-01 was a Thursday
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longWeekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func digits(_ value: Int, _ count: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, count - text.count)) + text
    }

    private var clock: String { "\(Self.digits(hour, 2)):\(Self.digits(minute, 2)):\(Self.digits(second, 2))" }

    /// `2003-06-10T04:00:00Z`
    var rfc3339: String {
        "\(Self.digits(year, 4))-\(Self.digits(month, 2))-\(Self.digits(day, 2))T\(clock)Z"
    }

    /// `Tue, 10 Jun 2003 04:00:00 GMT`, as RSS's `pubDate` writes it; also HTTP's IMF-fixdate.
    var rfc822: String {
        "\(Self.weekdays[weekday]), \(Self.digits(day, 2)) \(Self.months[month - 1]) \(Self.digits(year, 4)) \(clock) GMT"
    }

    /// HTTP's preferred form, `Sun, 06 Nov 1994 08:49:37 GMT` (the same text as ``rfc822``).
    var imfFixdate: String { rfc822 }

    /// HTTP's obsolete RFC 850 form with its two-digit year, `Sunday, 06-Nov-94 08:49:37 GMT`.
    var rfc850: String {
        "\(Self.longWeekdays[weekday]), \(Self.digits(day, 2))-\(Self.months[month - 1])-\(Self.digits(year % 100, 2)) \(clock) GMT"
    }

    /// C's asctime form, `Sun Nov  6 08:49:37 1994`.
    var asctime: String {
        "\(Self.weekdays[weekday]) \(Self.months[month - 1]) \(day < 10 ? " " : "")\(day) \(clock) \(Self.digits(year, 4))"
    }
}
