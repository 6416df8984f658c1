import Foundation

/// When a task is due, in the words of the task list: Fat Free CRM's buckets.
public enum TaskBucket: String, CaseIterable, Sendable, Hashable {
    /// Due before today.
    case overdue
    /// No due day: as soon as possible.
    case asap
    /// Due today.
    case today
    /// Due tomorrow.
    case tomorrow
    /// Due later this week (after tomorrow).
    case thisWeek
    /// Due next week (after tomorrow).
    case nextWeek
    /// Due after next week.
    case later

    /// The heading: `Overdue`, `Due ASAP`, `Today`, `Tomorrow`, `This week`, `Next week`, `Later`.
    public var title: String {
        switch self {
        case .overdue: "Overdue"
        case .asap: "Due ASAP"
        case .today: "Today"
        case .tomorrow: "Tomorrow"
        case .thisWeek: "This week"
        case .nextWeek: "Next week"
        case .later: "Later"
        }
    }
}

/// One bucket of the task list and its tasks.
public struct TaskGroup: Sendable, Hashable {
    /// The bucket.
    public var bucket: TaskBucket
    /// Its tasks, in the order given.
    public var tasks: [CRMTask]

    /// Makes a group.
    public init(bucket: TaskBucket, tasks: [CRMTask]) {
        self.bucket = bucket
        self.tasks = tasks
    }
}

/// Sorts tasks into ``TaskBucket``s: pure, with "now" and the calendar passed in.
///
/// Weeks follow the calendar's `firstWeekday`, days its time zone. "Tomorrow"
/// wins over "next week" when tomorrow starts a new week; "this week" is what
/// is left of the week after tomorrow.
///
/// For example:
///
/// ```swift
/// var calendar = Calendar(identifier: .gregorian)
/// calendar.firstWeekday = 2   // weeks start on Monday
/// for group in TaskBuckets(calendar: calendar).group(tasks, now: Date()) {
///     print(group.bucket.title, group.tasks.count)
/// }
/// ```
public struct TaskBuckets: Sendable {
    /// The calendar days and weeks are counted in.
    public var calendar: Calendar

    /// Makes a bucketing in `calendar`.
    public init(calendar: Calendar = .current) {
        self.calendar = calendar
    }

    /// The bucket of a task due on `due` (`yyyy-MM-dd`, or `nil` for as soon as
    /// possible), seen at `now`. A due day that cannot be read counts as ASAP:
    /// better shown early than lost at the bottom.
    public func bucket(forDue due: String?, now: Date) -> TaskBucket {
        guard let due, let dueDay = day(due) else { return .asap }
        let today = calendar.startOfDay(for: now)
        guard let days = calendar.dateComponents([.day], from: today, to: dueDay).day else { return .asap }
        if days < 0 { return .overdue }
        if days == 0 { return .today }
        if days == 1 { return .tomorrow }
        guard let week = calendar.dateInterval(of: .weekOfYear, for: today) else { return .later }
        if dueDay < week.end { return .thisWeek }
        guard let endOfNextWeek = calendar.date(byAdding: .weekOfYear, value: 1, to: week.end) else { return .later }
        return dueDay < endOfNextWeek ? .nextWeek : .later
    }

    /// The tasks grouped by bucket, in ``TaskBucket`` order, leaving out empty buckets.
    public func group(_ tasks: [CRMTask], now: Date) -> [TaskGroup] {
        var byBucket: [TaskBucket: [CRMTask]] = [:]
        for task in tasks {
            byBucket[bucket(forDue: task.due, now: now), default: []].append(task)
        }
        return TaskBucket.allCases.compactMap { bucket in
            byBucket[bucket].map { TaskGroup(bucket: bucket, tasks: $0) }
        }
    }

    /// The start of the day `yyyy-MM-dd` in the calendar's time zone, if it is a real day.
    func day(_ text: String) -> Date? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]) else { return nil }
        let components = DateComponents(year: year, month: month, day: day)
        guard let date = calendar.date(from: components) else { return nil }
        // Reject days that do not exist (2026-02-30 would roll over into March).
        let back = calendar.dateComponents([.year, .month, .day], from: date)
        guard back.year == year, back.month == month, back.day == day else { return nil }
        return calendar.startOfDay(for: date)
    }
}
