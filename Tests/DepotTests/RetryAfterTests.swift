import Depot
import Foundation
import Testing

/// `Retry-After` values: delay-seconds and the three HTTP-date forms.
@Suite struct RetryAfterTests {
    /// 2024-05-01 12:00:00 UTC.
    let now = Date(timeIntervalSince1970: 1_714_564_800)

    @Test func parsesTheThreeHTTPDateForms() {
        let expected = Date(timeIntervalSince1970: 784_111_777)   // 1994-11-06 08:49:37 UTC
        #expect(RetryAfter.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(RetryAfter.httpDate("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == expected)
        #expect(RetryAfter.httpDate("Sun Nov  6 08:49:37 1994") == expected)
        #expect(RetryAfter.httpDate("Sun, 31 Feb 1994 08:49:37 GMT") == nil)
        #expect(RetryAfter.httpDate("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
        #expect(RetryAfter.httpDate("yesterday") == nil)
    }

    @Test func delaySecondsAreWholeNonNegativeNumbers() {
        #expect(RetryAfter.delay("  120 ", now: now) == .seconds(120))
        #expect(RetryAfter.delay("0", now: now) == .zero)
        #expect(RetryAfter.delay("-5", now: now) == nil)
        #expect(RetryAfter.delay("1.5", now: now) == nil)
        #expect(RetryAfter.delay("", now: now) == nil)
        // Too many digits for Int64: a very long delay, not a crash.
        #expect((RetryAfter.delay(String(repeating: "9", count: 40), now: now) ?? .zero) > .seconds(1_000_000))
    }

    @Test func aDateIsMeasuredFromNowAndAPastOneIsZero() {
        #expect(RetryAfter.delay("Wed, 01 May 2024 12:00:30 GMT", now: now) == .seconds(30))
        #expect(RetryAfter.delay("Wed, 01 May 2024 11:00:00 GMT", now: now) == .zero)
    }
}
