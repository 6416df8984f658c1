import Depot

extension NetworkSimulator {
    /// Why a simulation could not go on.
    public struct DriverError: Error, CustomStringConvertible {
        /// What went wrong.
        public var description: String
    }

    /// Whether time may move now: every open transfer's consumer waits on the
    /// link, no task woken by the clock is still waiting to run, and `settled` holds.
    func isQuiet(_ settled: @Sendable () -> Bool) -> Bool {
        guard let clock = manualClock else { return true }
        return model.withLock { $0.allParked } && clock.pendingWakeups == 0 && settled()
    }

    /// Runs the simulation until the clock reaches `limit`: waits until everything
    /// is settled, then moves the clock to the next deadline (the link's next event
    /// or a task sleeping on the clock), and again.
    ///
    /// For example:
    ///
    /// ```swift
    /// async let load: Void = loadEverything(controller)
    /// try await simulator.run(until: .seconds(60)) { controller.runningJobCount == simulator.openTransferCount }
    /// ```
    ///
    /// - Parameters:
    ///   - limit: The simulated time to stop at (the clock ends exactly there).
    ///   - quietYields: How many extra yields the system must stay unchanged before
    ///     time moves (a margin for code that was just woken and has not parked yet).
    ///   - settled: True when the code under test has nothing to do until time
    ///     moves: every piece of its work is waiting in a simulator transfer or
    ///     sleeping on the clock. It is called often, from the driver's task.
    public func run(until limit: Duration, quietYields: Int = 4, settled: @escaping @Sendable () -> Bool = { true }) async throws {
        try await drive(stop: { _ in false }, limit: limit, quietYields: quietYields, settled: settled)
    }

    /// Runs the simulation until `condition` holds at a settled moment.
    ///
    /// Throws when the condition cannot become true: nothing is pending and time
    /// has nowhere to go, or `timeLimit` of simulated time has passed.
    ///
    /// - Parameters:
    ///   - condition: Checked whenever the system is settled.
    ///   - timeLimit: The simulated time after which to give up (one hour).
    ///   - quietYields: Extra yields the system must stay unchanged before time moves.
    ///   - settled: True when the code under test has nothing to do until time moves.
    public func run(until condition: @escaping @Sendable () -> Bool, timeLimit: Duration = .seconds(3600), quietYields: Int = 4, settled: @escaping @Sendable () -> Bool = { true }) async throws {
        try await drive(stop: { _ in condition() }, limit: timeLimit, quietYields: quietYields, settled: settled, stopIsGoal: true)
    }

    private func drive(stop: (Duration) -> Bool, limit: Duration, quietYields: Int, settled: @escaping @Sendable () -> Bool, stopIsGoal: Bool = false) async throws {
        guard let clock = manualClock else {
            throw DriverError(description: "run(until:) needs the simulator to be made with a ManualClock")
        }
        while true {
            try await settle(quietYields: quietYields, settled)
            let current = now()
            if stop(current) { return }
            if current >= limit {
                if stopIsGoal { throw DriverError(description: "condition still false after \(limit) of simulated time; \(diagnosis())") }
                return
            }
            let linkNext = model.withLock { $0.nextEventTime() }
            let clockNext = clock.nextDeadline.map { current + (clock.now.duration(to: $0)) }
            guard let next = [linkNext, clockNext].compactMap({ $0 }).min() else {
                if stopIsGoal { throw DriverError(description: "nothing is pending and the condition is false; \(diagnosis())") }
                try await jump(to: limit, from: current, clock: clock, quietYields: quietYields, settled)
                continue
            }
            try await jump(to: min(max(next, current), limit), from: current, clock: clock, quietYields: quietYields, settled)
        }
    }

    /// Moves to `target`: the link's events at `target` first (with the clock
    /// already reading `target`), then, once their consumers have parked again,
    /// the clock's sleepers due by then.
    private func jump(to target: Duration, from current: Duration, clock: ManualClock, quietYields: Int, _ settled: @escaping @Sendable () -> Bool) async throws {
        let instant = clock.now.advanced(by: target - current)
        clock.move(to: instant)
        let effects = model.withLock { model in
            model.advance(to: target)
            return model.takeEffects()
        }
        run(effects)
        try await settle(quietYields: quietYields, settled)
        clock.advance(to: instant)
    }

    /// Yields until the system is quiet and has stayed unchanged for `quietYields` yields.
    private func settle(quietYields: Int, _ settled: @escaping @Sendable () -> Bool) async throws {
        guard let clock = manualClock else { return }
        var stable = 0
        var spins = 0
        var last: (UInt64, Int)?
        while true {
            let fingerprint = (model.withLock { $0.version }, clock.sleeperCount)
            if isQuiet(settled) {
                if let last, last == fingerprint { stable += 1 } else { stable = 0 }
                if stable >= quietYields { return }
            } else {
                stable = 0
            }
            last = fingerprint
            spins += 1
            if spins > 2_000_000 {
                throw DriverError(description: "the system never settled; \(diagnosis())")
            }
            await Task.yield()
        }
    }

    private func diagnosis() -> String {
        let (open, parked) = model.withLock { model in (model.transfers.count, model.transfers.values.filter { $0.waiter != nil }.count) }
        let clockState = manualClock.map { "clock at \($0.now), \($0.sleeperCount) sleeping, \($0.pendingWakeups) woken not yet run" } ?? ""
        return "\(open) open transfers (\(parked) waiting on the link), \(clockState)"
    }
}

extension NetworkSimulator {
    /// The `settled` predicate for a controller that uses this simulator: time
    /// may move when every running job either waits on a simulated transfer,
    /// sleeps before a retry, or waits between byte ranges for urgent work.
    /// A job that is parsing, writing its cache or delivering its result
    /// keeps time still.
    ///
    /// For example:
    ///
    /// ```swift
    /// try await simulator.run(until: { ticket.isFinished }, settled: simulator.settled(with: controller))
    /// ```
    public func settled(with controller: NetworkController) -> @Sendable () -> Bool {
        { [weak self] in
            guard let self else { return true }
            let activity = controller.activity
            return activity.running == self.openTransferCount + activity.backingOff + activity.pausedBetweenRanges
        }
    }
}
