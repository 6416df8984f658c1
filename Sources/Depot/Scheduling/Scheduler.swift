import DequeModule

/// The controller's brain: a pure, synchronous state machine that decides what
/// runs next. It does no I/O and reads no clock; it takes events and returns
/// actions, which the ``NetworkController`` carries out.
///
/// Rules:
/// - highest priority first, FIFO within a priority;
/// - at most `limit` jobs running;
/// - jobs in a paused category wait;
/// - delayable jobs (`.low` and below) leave room for important work and,
///   when paced, start one after another (``drained(job:)``) and not while
///   urgent work (`.high` and above) runs;
/// - a ticket with dependencies waits until they all succeed, and fails with
///   `dependencyFailed` as soon as one fails or is cancelled;
/// - a ticket whose coalescing key matches a queued or running job joins that
///   job instead of making a new one (and promotes it if it is more urgent);
/// - `shutdown` cancels every ticket whose exit policy is `.cancel`; the
///   controller refuses new tickets from then on.
///
/// A *ticket* is one caller's request; a *job* is one transfer, shared by the
/// tickets that coalesced into it. A job's id is the id of the ticket that made it.
///
/// This file holds the core (tickets, jobs, the events that add and end them,
/// the limit, `pump`); each policy has a file of its own: `Scheduler+Queues`,
/// `+Dependencies`, `+Delayable` and `+CredentialHolds`.
struct Scheduler: Sendable {
    typealias ID = Ticket.ID

    /// What the scheduler needs to know about a ticket.
    struct Entry: Sendable, Hashable {
        var id: ID
        var priority: Priority
        var category: OperationCategory
        var exitPolicy: ExitPolicy
        /// Tickets sharing a key share one transfer.
        var coalescingKey: String?
        /// Tickets that must succeed first (only the ones still pending).
        var dependencies: [ID]
        /// Whether the job counts against the limit; a long-lived stream's
        /// does not (``Scheduler+Unslotted``).
        var holdsSlot: Bool

        init(id: ID, priority: Priority = .normal, category: OperationCategory = .default, exitPolicy: ExitPolicy = .cancel, coalescingKey: String? = nil, dependencies: [ID] = [], holdsSlot: Bool = true) {
            self.id = id
            self.priority = priority
            self.category = category
            self.exitPolicy = exitPolicy
            self.coalescingKey = coalescingKey
            self.dependencies = dependencies
            self.holdsSlot = holdsSlot
        }
    }

    /// How a ticket or job ended.
    enum Outcome: Sendable, Hashable {
        case succeeded
        case failed
        case cancelled
    }

    /// What the controller must do.
    enum Action: Sendable, Hashable {
        /// Start the transfer of this job.
        case start(job: ID)
        /// Stop this running job's transfer: nobody waits for it any more.
        case abort(job: ID)
        /// Resolve these tickets with the job's outcome.
        case resolve(job: ID, tickets: [ID], Outcome)
        /// This ticket is cancelled.
        case cancelled(ID)
        /// This ticket fails because `cause` failed or was cancelled.
        case dependencyFailed(ID, cause: ID)
        /// This ticket joined an existing job.
        case coalesced(ID, into: ID)
        /// This queued job now runs at a higher priority.
        case promoted(job: ID, from: Priority, to: Priority)
    }

    enum TicketState: Sendable {
        case blocked(Entry, remaining: Set<ID>)
        case waiting(job: ID)
    }

    struct Job: Sendable {
        var priority: Priority
        var category: OperationCategory
        var key: String?
        var waiters: [ID]
        /// The exit policy and category of the ticket that made the job: every
        /// waiter has them unless `overrides` says otherwise. Coalesced tickets
        /// nearly always share them, so the usual job allocates no dictionary.
        let founding: (exitPolicy: ExitPolicy, category: OperationCategory)
        var overrides: [ID: (exitPolicy: ExitPolicy, category: OperationCategory)] = [:]
        // Whether it runs is `running.contains(id)`, not a field: setting a field
        // through `jobs[id]?.state` costs a heap-allocated accessor frame per start.

        init(priority: Priority, category: OperationCategory, key: String?, founder: Entry) {
            self.priority = priority
            self.category = category
            self.key = key
            self.waiters = [founder.id]
            self.founding = (founder.exitPolicy, founder.category)
        }

        /// A ticket's own exit policy and category (for `shutdown()` and `cancel(category:)`).
        func policy(of ticket: ID) -> (exitPolicy: ExitPolicy, category: OperationCategory) {
            overrides[ticket] ?? founding
        }

        mutating func add(_ entry: Entry) {
            waiters.append(entry.id)
            if entry.exitPolicy != founding.exitPolicy || entry.category != founding.category {
                overrides[entry.id] = (entry.exitPolicy, entry.category)
            }
        }

        mutating func remove(_ ticket: ID) {
            waiters.removeAll { $0 == ticket }
            overrides[ticket] = nil
        }

    }

    var tickets: [ID: TicketState] = [:]
    var jobs: [ID: Job] = [:]
    /// One FIFO per priority; entries whose job is gone or re-prioritised are skipped lazily.
    var queues: [Deque<ID>] = Array(repeating: [], count: Priority.allCases.count)
    var byKey: [String: ID] = [:]
    var dependents: [ID: [ID]] = [:]
    private(set) var running: Set<ID> = []
    /// How many of `running` are at a delayable priority: kept with `running`
    /// (`markRunning`, `markStopped`, promotion) so that the mix needs no scan.
    var runningDelayableJobCount = 0
    /// Running delayable jobs that may still bring more than the pacing budget,
    /// and running urgent jobs (see ``paceDelayable``): until ``drained(job:)``
    /// says a delayable job's remaining bytes fit in it, or until an urgent
    /// job stops, no delayable job starts.
    var heavy: Set<ID> = []
    /// Whether delayable jobs start one after another (``DelayablePacing``):
    /// one at a time, each waiting until the one before it has at most the
    /// budget's bytes still to come. Bytes that low-priority work already has
    /// in flight sit in the bottleneck's queue ahead of anything urgent.
    var paceDelayable = false
    /// Running jobs started by ``trickle(from:)``: they take no slot, so work
    /// that arrives while one trickles starts beside it instead of behind it.
    var trickling: Set<ID> = []
    /// Jobs that hold no slot (long-lived streams), queued or running; they
    /// wait in ``unslottedQueue``, not in `queues` (``Scheduler+Unslotted``).
    var unslotted: Set<ID> = []
    /// Unslotted jobs waiting to start, oldest first.
    var unslottedQueue: Deque<ID> = []
    /// Running jobs sleeping before a retry (``rest(job:)``): they hold no
    /// delayable work back until ``wake(job:)``.
    var resting: Set<ID> = []
    var paused: Set<OperationCategory> = []
    /// Jobs out of the queues until ``releaseHeld()``, oldest first (ids of
    /// jobs since cancelled are skipped when released).
    var held: [ID] = []
    private(set) var limit: Int
    private(set) var isShuttingDown = false
    /// Tickets being cancelled together by `cancelMany`.
    var cancelling: Set<ID> = []
    /// The actions of the event being handled. Each event starts it afresh
    /// (`begin`) and returns it; once the caller has dropped the returned
    /// array, the next event reuses its storage instead of allocating.
    var out: [Action] = []

    init(limit: Int, pacesDelayable: Bool = false) {
        self.limit = max(0, limit)
        self.paceDelayable = pacesDelayable
    }

    // MARK: Queries

    /// Jobs waiting to start.
    var queuedJobCount: Int { jobs.keys.lazy.filter { !running.contains($0) }.count }
    /// Jobs running.
    var runningJobCount: Int { running.count }
    /// Tickets not yet resolved.
    var pendingTicketCount: Int { tickets.count }
    /// Whether nothing is queued, running or blocked.
    var isIdle: Bool { tickets.isEmpty && jobs.isEmpty }

    /// The job a ticket is part of, if it is queued or running.
    func job(of ticket: ID) -> ID? {
        if case .waiting(let job) = tickets[ticket] { return job }
        return nil
    }

    /// The tickets waiting for a job.
    func waiters(of job: ID) -> [ID] { jobs[job]?.waiters ?? [] }

    /// Whether a job's transfer is running.
    func isRunning(_ job: ID) -> Bool { running.contains(job) }

    /// The priority a job runs at.
    func priority(of job: ID) -> Priority? { jobs[job]?.priority }

    /// The category a job is scheduled under (its creator's): pausing that category holds it.
    func category(of job: ID) -> OperationCategory? { jobs[job]?.category }

    /// The jobs waiting to start, for inspection.
    var queuedJobs: [(id: ID, priority: Priority, category: OperationCategory)] {
        jobs.filter { !running.contains($0.key) }.map { ($0.key, $0.value.priority, $0.value.category) }
    }

    /// Whether the ticket is known and unresolved.
    func isPending(_ ticket: ID) -> Bool { tickets[ticket] != nil }

    // MARK: Events

    /// Adds a ticket.
    mutating func enqueue(_ entry: Entry) -> [Action] {
        precondition(tickets[entry.id] == nil, "ticket \(entry.id) enqueued twice")
        let pending = Set(entry.dependencies.filter { tickets[$0] != nil })
        if !pending.isEmpty {
            tickets[entry.id] = .blocked(entry, remaining: pending)
            for dependency in pending { dependents[dependency, default: []].append(entry.id) }
            return []
        }
        begin()
        admit(entry)
        pump()
        return out
    }

    /// A running job ended.
    mutating func finish(job id: ID, outcome: Outcome) -> [Action] {
        begin()
        if let job = jobs.removeValue(forKey: id) {
            markStopped(id, priority: job.priority)
            forgetUnslotted(id)
            if let key = job.key, byKey[key] == id { byKey[key] = nil }
            if !job.waiters.isEmpty {
                out.append(.resolve(job: id, tickets: job.waiters, outcome))
            }
            for ticket in job.waiters {
                tickets[ticket] = nil
                settle(ticket, outcome: outcome)
            }
        }
        pump()
        return out
    }

    /// One caller gives up. The job goes on while other tickets wait for it.
    mutating func cancel(_ ticket: ID) -> [Action] {
        begin()
        cancelTicket(ticket)
        pump()
        return out
    }

    /// Cancels every ticket in `category`, queued, blocked or running.
    mutating func cancel(category: OperationCategory) -> [Action] {
        let victims = tickets.compactMap { id, state -> ID? in
            switch state {
            case .blocked(let entry, _): return entry.category == category ? id : nil
            case .waiting(let job): return jobs[job]?.policy(of: id).category == category ? id : nil
            }
        }
        return cancelMany(victims)
    }

    /// Cancels every ticket.
    mutating func cancelAll() -> [Action] {
        cancelMany(Array(tickets.keys))
    }

    /// Changes how many jobs may run at once. Lowering it stops nothing that runs.
    mutating func setLimit(_ newLimit: Int) -> [Action] {
        limit = max(0, newLimit)
        begin()
        pump()
        return out
    }

    /// Cancels every ticket whose exit policy is `.cancel`. `.finish` tickets go on.
    mutating func shutdown() -> [Action] {
        isShuttingDown = true
        let victims = tickets.compactMap { id, state -> ID? in
            switch state {
            case .blocked(let entry, _):
                return entry.exitPolicy == .cancel ? id : nil
            case .waiting(let job):
                return jobs[job]?.policy(of: id).exitPolicy == .cancel ? id : nil
            }
        }
        return cancelMany(victims)
    }

    // MARK: Internals

    /// Starts the actions of a new event.
    mutating func begin() {
        out.removeAll(keepingCapacity: true)
    }

    private mutating func cancelMany(_ victims: [ID]) -> [Action] {
        begin()
        // Victims that depend on other victims are cancelled too, not failed as dependents.
        cancelling = Set(victims)
        defer { cancelling = [] }
        for id in victims.sorted() where tickets[id] != nil {
            cancelTicket(id)
        }
        pump()
        return out
    }

    private mutating func cancelTicket(_ id: ID) {
        guard let state = tickets.removeValue(forKey: id) else { return }
        out.append(.cancelled(id))
        switch state {
        case .blocked(_, let remaining):
            for dependency in remaining { dependents[dependency]?.removeAll { $0 == id } }
        case .waiting(let jobID):
            guard var job = jobs[jobID] else { break }
            job.remove(id)
            if job.waiters.isEmpty {
                if let key = job.key, byKey[key] == jobID { byKey[key] = nil }
                if running.contains(jobID) {
                    // Keep it counted as running until its task really ends.
                    job.key = nil
                    jobs[jobID] = job
                    out.append(.abort(job: jobID))
                } else {
                    jobs[jobID] = nil
                    forgetUnslotted(jobID)
                }
            } else {
                jobs[jobID] = job
            }
        }
        settle(id, outcome: .cancelled)
    }

    mutating func markRunning(_ id: ID, priority: Priority) {
        guard running.insert(id).inserted else { return }
        // A stream neither paces delayable work nor is paced.
        if unslotted.contains(id) { return }
        if priority <= Self.delayable {
            runningDelayableJobCount += 1
            heavy.insert(id)
        } else if priority >= Self.urgent {
            heavy.insert(id)
        }
    }

    mutating func markStopped(_ id: ID, priority: Priority) {
        if running.remove(id) != nil, priority <= Self.delayable, !unslotted.contains(id) { runningDelayableJobCount -= 1 }
        heavy.remove(id)
        trickling.remove(id)
        resting.remove(id)
    }

    /// Starts jobs while there is room: most urgent first, except that with a
    /// limit of 3 or more one delayable job runs beside important work even
    /// while more important work waits. Small important requests often wait on
    /// round trips and leave the link idle; one image keeps it busy without
    /// taking more than one slot.
    mutating func pump() {
        func start(_ id: ID) {
            guard let priority = jobs[id]?.priority else { return }
            markRunning(id, priority: priority)
            out.append(.start(job: id))
        }
        startUnslotted()
        // A trickling job runs only because nothing else could: it holds no slot.
        var occupied: Int { running.count - trickling.count - runningUnslottedCount }
        let reserve = limit >= 3 && runningMix.delayable == 0
        while occupied < (reserve ? limit - 1 : limit), let next = popNext(delayableAllowed: delayableRoom > 0) {
            start(next)
        }
        if reserve, occupied < limit {
            let room = delayableRoom > 0
            if let next = popNext(delayableAllowed: room, onlyDelayable: true) ?? popNext(delayableAllowed: room) {
                start(next)
            }
        }
    }
}
