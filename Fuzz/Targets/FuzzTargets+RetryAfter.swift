import Depot
import Foundation

extension FuzzTargets {
    /// When the fuzzed response arrived if the input does not say:
    /// 1994-11-06T07:49:37Z, an hour before RFC 9110's example date.
    static let defaultArrival: Double = 784_108_177

    /// The latest arrival tried: 2100-01-01T00:00:00Z.
    static let latestArrival: Double = 4_102_444_800

    /// `RetryAfter.delay(_:now:)` and `RetryAfter.httpDate(_:now:)` on arbitrary text.
    ///
    /// The input is the header value, optionally preceded by a line with the
    /// arrival time in seconds since 1970 (`1700000000\nSun, 06 Nov 1994
    /// 08:49:37 GMT`), folded into 1970–2100.
    ///
    /// Invariants: a delay is never negative; delay-seconds give exactly that
    /// many seconds; an HTTP date lies in the years 1900–9999 (or on the leap
    /// second after them), in whole seconds,
    /// has plain digits in its numeric fields (no sign), reads back to the same
    /// instant from its IMF-fixdate and asctime forms, and from its RFC 850 form
    /// when its year is within 50 years of the arrival (RFC 9110 §5.6.7); its
    /// delay is the time from the arrival to it (zero once past), to the millisecond.
    static func retryAfter(_ data: Data) {
        let (now, value) = arrivalAndValue(String(decoding: data, as: UTF8.self))
        let delay = RetryAfter.delay(value, now: now)
        let described = "\(value.debugDescription) at \(now.timeIntervalSince1970)"
        if let delay {
            check(delay >= .zero, "retry-after", "\(described) gave a negative delay \(delay)")
        }
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            let expected: Duration = Int64(trimmed).map { .seconds($0) } ?? .seconds(Int64.max / 1_000_000_000_000)
            check(delay == expected, "retry-after", "\(described) gave \(delay.map(String.init(describing:)) ?? "nil"), not \(expected)")
            return
        }
        guard let date = RetryAfter.httpDate(trimmed, now: now) else { return }
        let instant = date.timeIntervalSince1970
        check(instant == instant.rounded(.down), "retry-after", "\(described) gave a date with a fraction of a second: \(instant)")
        let civil = CivilTime(secondsSince1970: Int(instant))
        // A leap second at the very end of 9999 is the first instant of 10000, which no form can write.
        if civil.year == 10000, instant == CivilTime.storableRange.upperBound + 1 { return }
        check((1900...9999).contains(civil.year), "retry-after", "\(described) gave the year \(civil.year)")
        check(numericFieldsArePlainDigits(trimmed), "retry-after", "\(described) has a sign or a stray '-' in a number but was read as \(civil.imfFixdate)")
        for form in [civil.imfFixdate, civil.asctime] {
            let again = RetryAfter.httpDate(form, now: now)
            check(again == date, "retry-after", "\(described) gave \(civil.imfFixdate), but \(form.debugDescription) reads as \(again.map { "\($0.timeIntervalSince1970)" } ?? "nil")")
        }
        let arrivalYear = CivilTime(secondsSince1970: Int(now.timeIntervalSince1970.rounded(.down))).year
        if civil.year > arrivalYear - 50, civil.year <= arrivalYear + 50 {
            let again = RetryAfter.httpDate(civil.rfc850, now: now)
            check(again == date, "retry-after", "\(described) gave \(civil.imfFixdate), but \(civil.rfc850.debugDescription) reads as \(again.map { "\($0.timeIntervalSince1970)" } ?? "nil") in \(arrivalYear)")
        }
        guard let delay else { fail("retry-after", "\(described) is a date (\(civil.imfFixdate)) but gave no delay") }
        let expected = max(0, instant - now.timeIntervalSince1970)
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        check(abs(seconds - expected) <= 0.001, "retry-after", "\(described) gave \(delay), not \(expected) s")
    }

    /// The arrival time and the header value of a `retry-after` input.
    static func arrivalAndValue(_ text: String) -> (Date, String) {
        guard let newline = text.firstIndex(of: "\n"), let seconds = Double(text[..<newline]), seconds.isFinite else {
            return (Date(timeIntervalSince1970: defaultArrival), text)
        }
        let folded = seconds.magnitude.truncatingRemainder(dividingBy: latestArrival)
        return (Date(timeIntervalSince1970: folded), String(text[text.index(after: newline)...]))
    }

    /// Whether no number in an HTTP date has a sign: after the weekday (the
    /// first word, which the parser does not read), no `+`, and every `-` is
    /// one of RFC 850's separators, between a letter or digit and another.
    static func numericFieldsArePlainDigits(_ text: String) -> Bool {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
        let characters = Array(words.dropFirst().joined(separator: " "))
        for (index, character) in characters.enumerated() where character == "+" || character == "-" {
            guard character == "-", index > 0, index < characters.count - 1,
                  characters[index - 1].isLetter || characters[index - 1].isNumber,
                  characters[index + 1].isLetter || characters[index + 1].isNumber else { return false }
        }
        return true
    }
}
