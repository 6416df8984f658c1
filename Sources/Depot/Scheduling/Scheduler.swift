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

        init(id: ID, priority: Priority = .normal, category: OperationCategory = .default, exitPolicy: ExitPolicy = .cancel, coalescingKey: String? = nil, dependencies: [ID] = []) {
            self.id = id
            self.priority = priority
            self.category = category
            self.exitPolicy = exitPolicy
            self.coalescingKey = coalescingKey
            self.dependencies = dependencies
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

    private enum TicketState: Sendable {
        case blocked(Entry, remaining: Set<ID>)
        case waiting(job: ID)
    }

    private struct Job: Sendable {
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

    private var tickets: [ID: TicketState] = [:]
    private var jobs: [ID: Job] = [:]
    /// One FIFO per priority; entries whose job is gone or re-prioritised are skipped lazily.
    private var queues: [Deque<ID>] = Array(repeating: [], count: Priority.allCases.count)
    private var byKey: [String: ID] = [:]
    private var dependents: [ID: [ID]] = [:]
    private(set) var running: Set<ID> = []
    /// How many of `running` are at a delayable priority: kept with `running`
    /// (`markRunning`, `markStopped`, promotion) so that the mix needs no scan.
    private(set) var runningDelayableJobCount = 0
    /// Running delayable jobs that may still bring more than the pacing budget,
    /// and running urgent jobs (see ``paceDelayable``): until ``drained(job:)``
    /// says a delayable job's remaining bytes fit in it, or until an urgent
    /// job stops, no delayable job starts.
    private(set) var heavy: Set<ID> = []
    /// Whether delayable jobs start one after another (``DelayablePacing``):
    /// one at a time, each waiting until the one before it has at most the
    /// budget's bytes still to come. Bytes that low-priority work already has
    /// in flight sit in the bottleneck's queue ahead of anything urgent.
    private(set) var paceDelayable = false
    /// Running jobs started by ``trickle(from:)``: they take no slot, so work
    /// that arrives while one trickles starts beside it instead of behind it.
    private(set) var trickling: Set<ID> = []
    /// Running jobs sleeping before a retry (``rest(job:)``): they hold no
    /// delayable work back until ``wake(job:)``.
    private(set) var resting: Set<ID> = []
    private(set) var paused: Set<OperationCategory> = []
    /// Jobs out of the queues until ``releaseHeld()``, oldest first (ids of
    /// jobs since cancelled are skipped when released).
    private var held: [ID] = []
    private(set) var limit: Int
    private(set) var isShuttingDown = false
    /// Tickets being cancelled together by `cancelMany`.
    private var cancelling: Set<ID> = []
    /// The actions of the event being handled. Each event starts it afresh
    /// (`begin`) and returns it; once the caller has dropped the returned
    /// array, the next event reuses its storage instead of allocating.
    private var out: [Action] = []

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

    /// Queued jobs in `category` stop starting. Running ones go on.
    mutating func pause(category: OperationCategory) -> [Action] {
        paused.insert(category)
        return []
    }

    /// Jobs in `category` may start again.
    mutating func resume(category: OperationCategory) -> [Action] {
        paused.remove(category)
        // A job that trickled out of this category now runs as any other: it holds its slot.
        trickling = trickling.filter { jobs[$0]?.category != category }
        begin()
        pump()
        return out
    }

    /// Turns delayable pacing on or off; off, delayable jobs start whenever
    /// ``delayableRoom`` allows, as before pacing existed.
    mutating func setPacing(_ on: Bool) -> [Action] {
        paceDelayable = on
        begin()
        pump()
        return out
    }

    /// A running delayable job has at most the pacing budget's bytes still to
    /// come: delayable jobs may start again. A no-op for any other job (an
    /// urgent job holds delayable work back until it stops).
    mutating func drained(job id: ID) -> [Action] {
        guard let job = jobs[id], job.priority < Self.urgent, heavy.remove(id) != nil else { return [] }
        begin()
        pump()
        return out
    }

    /// Whether a running job still holds back other delayable work under pacing.
    func isHeavy(_ job: ID) -> Bool { heavy.contains(job) }

    /// A running job sleeps before its next attempt (a retry's backoff, perhaps
    /// a long `Retry-After`): it sends and receives nothing meanwhile, so it
    /// holds no delayable work back and pauses no byte ranges.
    mutating func rest(job id: ID) -> [Action] {
        guard running.contains(id), resting.insert(id).inserted, heavy.remove(id) != nil else { return [] }
        begin()
        pump()
        return out
    }

    /// The job's next attempt begins: under pacing it holds delayable work back
    /// again, as a job that starts does. Delayable work that started while it
    /// slept goes on (its ranges wait, if it is ranged).
    mutating func wake(job id: ID) {
        guard resting.remove(id) != nil, running.contains(id), let job = jobs[id] else { return }
        if job.priority <= Self.delayable || job.priority >= Self.urgent { heavy.insert(id) }
    }

    /// Whether a running delayable job may ask for its download's next byte
    /// range: no other urgent job runs (see ``DelayablePacing``). A job that is
    /// no longer delayable, or no longer known, never waits.
    func mayContinueRanges(of id: ID) -> Bool {
        guard let job = jobs[id], job.priority <= Self.delayable else { return true }
        return !running.contains { $0 != id && !resting.contains($0) && (jobs[$0]?.priority ?? .low) >= Self.urgent }
    }

    /// Changes how many jobs may run at once. Lowering it stops nothing that runs.
    mutating func setLimit(_ newLimit: Int) -> [Action] {
        limit = max(0, newLimit)
        begin()
        pump()
        return out
    }

    /// Puts a running job back at the tail of its priority's queue, its tickets
    /// still waiting: the transfer found no network and will run again when the
    /// limit allows. A job nobody waits for any more ends as cancelled instead.
    ///
    /// The tail, so that offline probes take turns: at the head, a job whose
    /// host alone refuses connections would be every probe's pick, and work for
    /// reachable hosts behind it would never run.
    ///
    /// With `holding`, the job waits out of the queues until ``releaseHeld()``
    /// (it needs credentials that are not there), holding no slot.
    mutating func requeue(job id: ID, holding: Bool = false) -> [Action] {
        if let job = jobs[id], running.contains(id) {
            guard !job.waiters.isEmpty else { return finish(job: id, outcome: .cancelled) }
            markStopped(id, priority: job.priority)
            if holding {
                held.append(id)
            } else {
                queues[job.priority.rawValue].append(id)
            }
        }
        begin()
        pump()
        return out
    }

    /// Puts every held job back in its queue, oldest first.
    mutating func releaseHeld() -> [Action] {
        let released = held
        held.removeAll()
        for id in released {
            guard let job = jobs[id], !running.contains(id) else { continue }
            queues[job.priority.rawValue].append(id)
        }
        begin()
        pump()
        return out
    }

    /// How many jobs wait for ``releaseHeld()``.
    var heldJobCount: Int { held.reduce(0) { $0 + (jobs[$1] != nil ? 1 : 0) } }

    /// Starts the oldest, most urgent queued job of `categories` even though they
    /// are paused, when nothing runs and nothing else can start: on a network too
    /// poor for images, images still trickle one at a time when they are all
    /// that is left, and each one measures the network again.
    mutating func trickle(from categories: Set<OperationCategory>) -> [Action] {
        guard running.isEmpty, limit > 0, !categories.isEmpty else { return [] }
        for priority in Priority.allCases.reversed() {
            let index = priority.rawValue
            guard let position = queues[index].firstIndex(where: { id in
                guard let job = jobs[id], isLive(id, at: priority) else { return false }
                return categories.contains(job.category)
            }) else { continue }
            let id = queues[index].remove(at: position)
            markRunning(id, priority: priority)
            trickling.insert(id)
            begin()
            out.append(.start(job: id))
            return out
        }
        return []
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
    private mutating func begin() {
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
                }
            } else {
                jobs[jobID] = job
            }
        }
        settle(id, outcome: .cancelled)
    }

    /// A ticket resolved: release or fail the tickets that depend on it.
    private mutating func settle(_ id: ID, outcome: Outcome) {
        guard let waiting = dependents.removeValue(forKey: id) else { return }
        for dependent in waiting where !cancelling.contains(dependent) {
            guard case .blocked(let entry, var remaining) = tickets[dependent] else { continue }
            if outcome == .succeeded {
                remaining.remove(id)
                if remaining.isEmpty {
                    tickets[dependent] = nil
                    admit(entry)
                } else {
                    tickets[dependent] = .blocked(entry, remaining: remaining)
                }
            } else {
                tickets[dependent] = nil
                for other in remaining where other != id { dependents[other]?.removeAll { $0 == dependent } }
                out.append(.dependencyFailed(dependent, cause: id))
                settle(dependent, outcome: .failed)
            }
        }
    }

    /// A ready ticket joins a matching job or makes a new queued one.
    private mutating func admit(_ entry: Entry) {
        if let key = entry.coalescingKey, let jobID = byKey[key], var job = jobs[jobID] {
            job.add(entry)
            tickets[entry.id] = .waiting(job: jobID)
            out.append(.coalesced(entry.id, into: jobID))
            if entry.priority > job.priority {
                out.append(.promoted(job: jobID, from: job.priority, to: entry.priority))
                let isRunning = running.contains(jobID)
                if isRunning, job.priority <= Self.delayable, entry.priority > Self.delayable {
                    runningDelayableJobCount -= 1
                    // Urgent now, it goes on holding delayable work back until drained.
                    if entry.priority < Self.urgent { heavy.remove(jobID) }
                }
                job.priority = entry.priority
                if !isRunning, !held.contains(jobID) { queues[entry.priority.rawValue].append(jobID) }
            }
            jobs[jobID] = job
            return
        }
        jobs[entry.id] = Job(priority: entry.priority, category: entry.category, key: entry.coalescingKey, founder: entry)
        tickets[entry.id] = .waiting(job: entry.id)
        if let key = entry.coalescingKey { byKey[key] = entry.id }
        queues[entry.priority.rawValue].append(entry.id)
    }

    /// Work at this priority or below is "delayable", as browsers call images
    /// and prefetches: it yields the link to more important work.
    static let delayable = Priority.low

    /// Work at this priority or above is "urgent": under pacing, no delayable
    /// job starts while one runs, so that no delayable bytes queue ahead of its
    /// later ones. Its own bytes keep the link busy; the link idles for one
    /// round trip when it ends. (`.normal` work shares the link with one
    /// delayable job: small requests that wait on round trips would leave it idle.)
    static let urgent = Priority.high

    /// How many delayable jobs run now, and whether important work runs beside them.
    private var runningMix: (delayable: Int, important: Bool) {
        (runningDelayableJobCount, running.count > runningDelayableJobCount)
    }

    private mutating func markRunning(_ id: ID, priority: Priority) {
        guard running.insert(id).inserted else { return }
        if priority <= Self.delayable {
            runningDelayableJobCount += 1
            heavy.insert(id)
        } else if priority >= Self.urgent {
            heavy.insert(id)
        }
    }

    private mutating func markStopped(_ id: ID, priority: Priority) {
        if running.remove(id) != nil, priority <= Self.delayable { runningDelayableJobCount -= 1 }
        heavy.remove(id)
        trickling.remove(id)
        resting.remove(id)
    }

    /// How many more delayable jobs may start now. With a limit of 3 or more,
    /// one slot stays free for important work (with 2, keeping one free would
    /// halve the images' concurrency and leave the link idle on every round trip); while important work runs, at
    /// most one delayable job does (Chrome's rule for requests while
    /// layout-blocking ones are in flight). A low-priority transfer that shares
    /// the link slows every other transfer, so this is what lets a high-priority
    /// request jump a queue of a hundred images on a slow link. Under pacing,
    /// none while a delayable or urgent job that is not yet drained runs.
    private var delayableRoom: Int {
        if paceDelayable, !heavy.isEmpty { return 0 }
        let mix = runningMix
        let cap = mix.important ? 1 : (limit >= 3 ? limit - 1 : limit)
        return max(0, cap - mix.delayable)
    }

    /// Starts jobs while there is room: most urgent first, except that with a
    /// limit of 3 or more one delayable job runs beside important work even
    /// while more important work waits. Small important requests often wait on
    /// round trips and leave the link idle; one image keeps it busy without
    /// taking more than one slot.
    private mutating func pump() {
        func start(_ id: ID) {
            guard let priority = jobs[id]?.priority else { return }
            markRunning(id, priority: priority)
            out.append(.start(job: id))
        }
        // A trickling job runs only because nothing else could: it holds no slot.
        var occupied: Int { running.count - trickling.count }
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

    private mutating func popNext(delayableAllowed: Bool, onlyDelayable: Bool = false) -> ID? {
        for priority in Priority.allCases.reversed() {
            if onlyDelayable, priority > Self.delayable { continue }
            if priority <= Self.delayable, !delayableAllowed { return nil }
            let index = priority.rawValue
            // Drop stale heads cheaply, then scan past paused categories.
            while let head = queues[index].first, !isLive(head, at: priority) {
                queues[index].removeFirst()
            }
            var position = queues[index].startIndex
            while position < queues[index].endIndex {
                let id = queues[index][position]
                if !isLive(id, at: priority) {
                    queues[index].remove(at: position)
                    continue
                }
                if let job = jobs[id], !paused.contains(job.category) {
                    queues[index].remove(at: position)
                    return id
                }
                position += 1
            }
        }
        return nil
    }

    private func isLive(_ id: ID, at priority: Priority) -> Bool {
        guard let job = jobs[id] else { return false }
        return !running.contains(id) && job.priority == priority
    }
}
