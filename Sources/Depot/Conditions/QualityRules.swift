/// What to hold back when the network is bad: categories to pause and queued
/// work to drop, and what to let go again when it recovers.
///
/// The controller applies its configuration's rules whenever the quality
/// changes, and undoes them when the network recovers. A category the user
/// paused stays paused: the rules resume only what they paused themselves.
///
/// For example, pause images on a moderate network already, and drop nothing:
///
/// ```swift
/// var configuration = NetworkController.Configuration(baseURL: api)
/// configuration.conditions.rules = QualityRules(threshold: .moderate, pausedCategories: [.images], dropPriorityAtMost: nil)
/// ```
public struct QualityRules: Sendable, Hashable {
    /// The rules apply at this quality and below.
    public var threshold: ConnectionQuality
    /// Categories paused while the rules apply.
    public var pausedCategories: Set<OperationCategory>
    /// Queued droppable work at or below this priority is cancelled while the
    /// rules apply; `nil` cancels nothing.
    public var dropPriorityAtMost: Priority?

    /// Makes rules.
    ///
    /// - Parameters:
    ///   - threshold: The rules apply at this quality and below (`.poor`).
    ///   - pausedCategories: What to pause (`[.images]`).
    ///   - dropPriorityAtMost: The highest priority of queued droppable work to cancel (`.low`).
    public init(threshold: ConnectionQuality = .poor, pausedCategories: Set<OperationCategory> = [.images], dropPriorityAtMost: Priority? = .low) {
        self.threshold = threshold
        self.pausedCategories = pausedCategories
        self.dropPriorityAtMost = dropPriorityAtMost
    }

    /// At `.poor` or worse, pause `.images` and cancel queued droppable work of priority `.low` or lower.
    public static let `default` = QualityRules()

    /// Rules that never hold anything back.
    public static let none = QualityRules(threshold: .offline, pausedCategories: [], dropPriorityAtMost: nil)

    /// One queued operation, as the rules see it.
    package struct Queued<ID: Hashable & Sendable>: Sendable, Hashable {
        /// The operation's (or job's) identity.
        package var id: ID
        /// Its priority.
        package var priority: Priority
        /// Its category.
        package var category: OperationCategory

        /// Describes a queued operation.
        package init(id: ID, priority: Priority, category: OperationCategory) {
            self.id = id
            self.priority = priority
            self.category = category
        }
    }

    /// What a quality change asks for.
    package struct Changes<ID: Hashable & Sendable>: Sendable, Hashable {
        /// Categories to pause.
        package var pause: Set<OperationCategory> = []
        /// Categories to resume.
        package var resume: Set<OperationCategory> = []
        /// Queued operations to cancel, in the order they were given.
        package var cancel: [ID] = []

        /// Whether there is nothing to do.
        package var isEmpty: Bool { pause.isEmpty && resume.isEmpty && cancel.isEmpty }
    }

    /// Whether the rules apply at `quality`.
    ///
    /// - Parameter quality: A quality.
    package func applies(at quality: ConnectionQuality) -> Bool {
        quality <= threshold && !(pausedCategories.isEmpty && dropPriorityAtMost == nil)
    }

    /// Whether an operation of this priority, if droppable, is cancelled while the rules apply.
    /// A controller asks this for work enqueued while the network is bad.
    ///
    /// - Parameters:
    ///   - priority: The operation's priority.
    ///   - quality: The current quality.
    package func drops(_ priority: Priority, at quality: ConnectionQuality) -> Bool {
        guard applies(at: quality), let limit = dropPriorityAtMost else { return false }
        return priority <= limit
    }

    /// What to do when the quality moves from `old` to `new`.
    ///
    /// Entering the rules pauses their categories and cancels the queued
    /// droppable work at or below ``dropPriorityAtMost``; leaving them resumes
    /// the categories (cancelled work stays cancelled). Moving within or outside
    /// the rules changes nothing.
    ///
    /// - Parameters:
    ///   - old: The quality before.
    ///   - new: The quality now.
    ///   - queued: The work waiting to start (running work is never cancelled).
    ///   - isDroppable: Whether an operation may be dropped on a bad network.
    package func changes<ID: Hashable & Sendable>(
        from old: ConnectionQuality,
        to new: ConnectionQuality,
        queued: [Queued<ID>],
        isDroppable: (ID) -> Bool
    ) -> Changes<ID> {
        var changes = Changes<ID>()
        switch (applies(at: old), applies(at: new)) {
        case (false, true):
            changes.pause = pausedCategories
            changes.cancel = queued.filter { drops($0.priority, at: new) && isDroppable($0.id) }.map(\.id)
        case (true, false):
            changes.resume = pausedCategories
        default:
            break
        }
        return changes
    }
}
