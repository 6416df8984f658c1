import Foundation

/// Central control: cancelling, pausing, the concurrency limit, and what is going on.
extension NetworkController {
    // MARK: - Central control

    func cancel(_ id: Ticket.ID) {
        change { $0.cancel(id) }
    }

    /// Cancels every queued, waiting and running operation in `category`.
    public func cancel(category: OperationCategory) {
        change { $0.cancel(category: category) }
    }

    /// Cancels every operation.
    public func cancelAll() {
        change { $0.cancelAll() }
    }

    /// Stops starting operations in `category`. Running ones go on.
    public func pause(category: OperationCategory) {
        let now = timebase.now()
        let effects = state.withLock { state in
            var effects: [Effect] = []
            handle(.userPaused(category), in: &state, at: now, into: &effects)
            return effects
        }
        perform(effects)
    }

    /// Lets operations in `category` start again.
    /// A category that a quality rule paused stays paused until the network recovers.
    public func resume(category: OperationCategory) {
        let now = timebase.now()
        let effects = state.withLock { state -> [Effect] in
            var effects: [Effect] = []
            handle(.userResumed(category), in: &state, at: now, into: &effects)
            return effects
        }
        perform(effects)
    }

    /// The categories currently paused.
    public var pausedCategories: Set<OperationCategory> {
        state.withLock { $0.scheduler.paused }
    }

    /// How many transfers may run at once now: what the configuration's
    /// ``Configuration/Limits/concurrency`` policy gives for the measured
    /// quality (0 offline, 1 while an offline probe runs). The policy is the
    /// one place the limit is set.
    public var concurrencyLimit: Int {
        state.withLock { $0.scheduler.limit }
    }

    /// How much work is waiting and running, for a status line.
    public struct Activity: Sendable, Hashable {
        /// Transfers waiting to start.
        public var queued: Int
        /// Transfers running.
        public var running: Int
        /// Operations waiting for their dependencies.
        public var blocked: Int
        /// The concurrency limit.
        public var limit: Int
        /// Running transfers sleeping before a retry.
        public var backingOff: Int
        /// Running delayable downloads paused between two byte ranges while
        /// urgent work runs (see ``DelayablePacing``).
        public var pausedBetweenRanges: Int

        /// Makes an activity summary (for previews and tests).
        public init(queued: Int, running: Int, blocked: Int, limit: Int, backingOff: Int = 0, pausedBetweenRanges: Int = 0) {
            self.queued = queued
            self.running = running
            self.blocked = blocked
            self.limit = limit
            self.backingOff = backingOff
            self.pausedBetweenRanges = pausedBetweenRanges
        }
    }

    /// How much work is waiting and running now.
    public var activity: Activity {
        state.withLock { state in
            let scheduler = state.scheduler
            let inJobs = state.records.keys.filter { scheduler.job(of: $0) != nil }.count
            return Activity(
                queued: scheduler.queuedJobCount,
                running: scheduler.runningJobCount,
                blocked: state.records.count - inJobs,
                limit: scheduler.limit,
                backingOff: state.backingOff,
                pausedBetweenRanges: state.rangeWaiters.count
            )
        }
    }

    /// Everything that happens to operations from now on, as an asynchronous sequence.
    ///
    /// Each call starts a new subscription; events before it are not replayed.
    /// The sequence ends when the controller shuts down. A subscriber that
    /// falls more than `Configuration.observability.eventBufferSize` events behind loses the
    /// oldest.
    ///
    /// For example:
    ///
    /// ```swift
    /// for await event in controller.events() where event.kind == .failed {
    ///     print(event)
    /// }
    /// ```
    public func events() -> NetworkEvents {
        DepotStream(hub.subscribe())
    }

    func change(_ body: (inout Scheduler) -> [Scheduler.Action]) {
        let now = timebase.now()
        let effects = state.withLock { state in
            let actions = body(&state.scheduler)
            return apply(actions, in: &state, at: now)
        }
        perform(effects)
    }
}
