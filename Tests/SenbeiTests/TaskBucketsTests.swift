import Foundation
import SenbeiKit
import Testing

/// The task buckets, with "now" and the calendar given: every bucket and the
/// edges of days and weeks.
@Suite(.timeLimit(.minutes(1)))
struct TaskBucketsTests {
    static func calendar(firstWeekday: Int, zone: String = "UTC") -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.firstWeekday = firstWeekday
        calendar.timeZone = TimeZone(identifier: zone) ?? .gmt
        return calendar
    }

    /// An instant written in RFC 3339.
    static func at(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text), "bad test date \(text)")
    }

    let mondayWeeks = TaskBuckets(calendar: calendar(firstWeekday: 2))

    // 2026-01-07 is a Wednesday; weeks start on Monday 2026-01-05 and 2026-01-12.
    @Test(arguments: [
        (nil, TaskBucket.asap),
        ("soon", .asap),
        ("2026-02-30", .asap),
        ("2025-12-31", .overdue),
        ("2026-01-06", .overdue),
        ("2026-01-07", .today),
        ("2026-01-08", .tomorrow),
        ("2026-01-09", .thisWeek),
        ("2026-01-11", .thisWeek),   // Sunday: the week's last day
        ("2026-01-12", .nextWeek),   // Monday: next week's first day
        ("2026-01-18", .nextWeek),
        ("2026-01-19", .later),
        ("2027-01-01", .later),
    ] as [(String?, TaskBucket)])
    func onAWednesday(due: String?, bucket: TaskBucket) throws {
        #expect(mondayWeeks.bucket(forDue: due, now: try Self.at("2026-01-07T12:00:00Z")) == bucket)
    }

    @Test func dayEdgesFollowTheCalendarsTimeZone() throws {
        // The last minute of Wednesday, and the first of Thursday, in UTC
        #expect(mondayWeeks.bucket(forDue: "2026-01-07", now: try Self.at("2026-01-07T23:59:59Z")) == .today)
        #expect(mondayWeeks.bucket(forDue: "2026-01-07", now: try Self.at("2026-01-08T00:00:00Z")) == .overdue)
        // The same instant is already Thursday in Tokyo
        let tokyo = TaskBuckets(calendar: Self.calendar(firstWeekday: 2, zone: "Asia/Tokyo"))
        #expect(tokyo.bucket(forDue: "2026-01-08", now: try Self.at("2026-01-07T23:30:00Z")) == .today)
        #expect(tokyo.bucket(forDue: "2026-01-07", now: try Self.at("2026-01-07T23:30:00Z")) == .overdue)
    }

    @Test func onTheLastDayOfTheWeekTomorrowWinsOverNextWeek() throws {
        let sunday = try Self.at("2026-01-11T09:00:00Z")
        #expect(mondayWeeks.bucket(forDue: "2026-01-11", now: sunday) == .today)
        #expect(mondayWeeks.bucket(forDue: "2026-01-12", now: sunday) == .tomorrow)
        #expect(mondayWeeks.bucket(forDue: "2026-01-13", now: sunday) == .nextWeek)
        #expect(mondayWeeks.bucket(forDue: "2026-01-18", now: sunday) == .nextWeek)
        #expect(mondayWeeks.bucket(forDue: "2026-01-19", now: sunday) == .later)
    }

    @Test func weeksStartOnTheCalendarsFirstWeekday() throws {
        let sundayWeeks = TaskBuckets(calendar: Self.calendar(firstWeekday: 1))
        let wednesday = try Self.at("2026-01-07T12:00:00Z")
        #expect(sundayWeeks.bucket(forDue: "2026-01-10", now: wednesday) == .thisWeek)   // Saturday ends the week
        #expect(sundayWeeks.bucket(forDue: "2026-01-11", now: wednesday) == .nextWeek)   // Sunday starts the next
        #expect(sundayWeeks.bucket(forDue: "2026-01-17", now: wednesday) == .nextWeek)
        #expect(sundayWeeks.bucket(forDue: "2026-01-18", now: wednesday) == .later)
        #expect(mondayWeeks.bucket(forDue: "2026-01-11", now: wednesday) == .thisWeek)  // the same Sunday, Monday weeks
    }

    @Test func groupsComeInBucketOrderWithoutEmptyOnes() throws {
        let tasks = [
            CRMTask(id: 1, name: "later", due: "2026-03-01"),
            CRMTask(id: 2, name: "asap"),
            CRMTask(id: 3, name: "overdue", due: "2026-01-01"),
            CRMTask(id: 4, name: "today", due: "2026-01-07"),
            CRMTask(id: 5, name: "also today", due: "2026-01-07"),
        ]
        let groups = mondayWeeks.group(tasks, now: try Self.at("2026-01-07T12:00:00Z"))
        #expect(groups.map(\.bucket) == [.overdue, .asap, .today, .later])
        #expect(groups.map { $0.tasks.map(\.id) } == [[3], [2], [4, 5], [1]])
        #expect(groups.map(\.bucket.title) == ["Overdue", "Due ASAP", "Today", "Later"])
        #expect(mondayWeeks.group([], now: try Self.at("2026-01-07T12:00:00Z")).isEmpty)
    }
}
