import Foundation
import Logging
import Synchronization

/// The one object that owns all network work in an app.
///
/// Make one at launch and hand it down; there is no shared instance. Give it
/// operations; it decides when they run (priority, categories, dependencies,
/// a concurrency limit), shares identical GETs, applies the same transfer rules
/// to every transport, reports what happens as events, and at exit decides
/// what may finish.
///
/// ```swift
/// let controller = NetworkController(configuration: .init(baseURL: serverURL))
///
/// // Callback style: the completion runs once, on the main actor, always asynchronously.
/// let ticket = controller.enqueue(FetchTopSongs()) { result in
///     refreshControl.endRefreshing()
/// }
///
/// // async/await style: cancelling the task cancels the operation.
/// let songs = try await controller.perform(FetchTopSongs())
/// ```
public final class NetworkController: Sendable {
    /// What this controller was made from.
    public let configuration: Configuration

    let timebase: Timebase
    let hub: EventHub
    let pipeline: TransferPipeline
    let state: Mutex<State>

    /// Made once per job, at enqueue, around the concrete operation type.
    typealias JobRunner = @Sendable (JobEnvironment) async -> JobResult

    struct JobEnvironment: Sendable {
        let job: Ticket.ID
        let onProgress: @Sendable (TransferProgress) -> Void
        /// Cancels the job's own task (used when its transfer times out).
        let cancel: @Sendable () -> Void
    }

    struct JobResult: Sendable {
        var result: Swift.Result<any Sendable, DepotError>
        var status: Int?
        var sample: TransferSample?
        /// The transfer found no network and the operation waits for it: back to the queue.
        var waitsForNetwork = false
    }

    struct TicketRecord: Sendable {
        let ticket: Ticket
        let priority: Priority
        let enqueuedAt: Duration
        let runner: JobRunner
        let deliver: @Sendable (Swift.Result<any Sendable, DepotError>) -> Void
    }

    struct State: Sendable {
        var scheduler: Scheduler
        var records: [Ticket.ID: TicketRecord] = [:]
        var tasks: [Ticket.ID: Task<Void, Never>] = [:]
        /// Jobs aborted between their start action and their task's launch.
        var abortedBeforeLaunch: Set<Ticket.ID> = []
        /// Jobs started whose task is not launched yet.
        var launching = 0
        /// Immediate jobs that ended before their task handle was stored.
        var endedBeforeStored: Set<Ticket.ID> = []
        var isShutDown = false
        var report: ShutdownReport?
        var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var conditions: ConditionsState
        /// The offline probe loop, while offline.
        var probeTask: Task<Void, Never>?
        var nextWaiter: UInt64 = 0
    }

    /// What to do outside the lock. Resuming continuations and cancelling tasks
    /// take the Swift runtime's task locks, so they must never run under ours.
    enum Effect {
        case emit(NetworkEvent)
        case cancel(Task<Void, Never>)
        case resume(CheckedContinuation<Void, Never>)
        case launch(Ticket.ID, JobRunner, immediately: Bool)
        case deliver(@Sendable (Swift.Result<any Sendable, DepotError>) -> Void, Swift.Result<any Sendable, DepotError>)
        case log(Logger.Level, Logger.Message, Logger.Metadata)
        case startProbing
    }

    private static let ticketCounter = Atomic<UInt64>(0)
    /// Body bytes received by every transfer of this controller (see ``LinkMeter``).
    let linkBytes = LinkMeter.Counter()

    /// Makes a controller.
    public init(configuration: Configuration = Configuration()) {
        var configuration = configuration
        // Resolve relative paths against a directory URL once, not per request.
        configuration.baseURL = configuration.baseURL?.appendingSlashIfNeeded()
        self.configuration = configuration
        let timebase = Timebase(configuration.clock)
        self.timebase = timebase
        self.hub = EventHub(bufferSize: configuration.eventBufferSize)
        self.pipeline = TransferPipeline(
            transport: configuration.transport,
            timebase: timebase,
            maximumBodySize: configuration.maximumBodySize,
            redirectLimit: configuration.redirectLimit,
            watch: DeadlineWatch(timebase: timebase)
        )
        let conditions = ConditionsState(configuration: configuration)
        configuration.trace?.quality(conditions.monitor.quality, at: .zero)
        self.state = Mutex(State(scheduler: Scheduler(limit: conditions.effectiveLimit), conditions: conditions))
    }

    // MARK: - Enqueue

    /// Queues an operation and calls `completion` once with its result.
    ///
    /// The completion is always called asynchronously, on the main actor, exactly
    /// once: also when the operation is cancelled, fails, or shares another's transfer.
    ///
    /// - Parameters:
    ///   - operation: What to do.
    ///   - dependencies: Tickets that must succeed first. If one fails or is
    ///     cancelled, this fails with ``DepotError/Code/dependencyFailed``.
    ///   - completion: Called with the output or the error.
    /// - Returns: A ticket to cancel the operation, watch its progress or compare it with the current one.
    @discardableResult
    public func enqueue<Operation: NetworkOperation>(
        _ operation: Operation,
        after dependencies: [Ticket] = [],
        completion: @escaping @MainActor @Sendable (Swift.Result<Operation.Output, DepotError>) -> Void = { _ in }
    ) -> Ticket {
        submit(operation, after: dependencies) { _ in
            { result in
                let typed = Self.typed(result, as: Operation.Output.self, operation: operation.name)
                Task { @MainActor in completion(typed) }
            }
        }
    }

    /// Queues an operation and calls `completion` once with its ticket and result,
    /// so the completion can tell whether the answer is still the one wanted.
    ///
    /// ```swift
    /// currentSearch?.cancel()
    /// currentSearch = controller.enqueue(SearchContacts(query: text)) { ticket, result in
    ///     guard ticket == self.currentSearch else { return }   // a stale answer
    ///     self.show(result)
    /// }
    /// ```
    ///
    /// Delivery is the same as with the one-argument completion: on the main actor,
    /// always asynchronously, exactly once.
    @discardableResult
    public func enqueue<Operation: NetworkOperation>(
        _ operation: Operation,
        after dependencies: [Ticket] = [],
        completion: @escaping @MainActor @Sendable (Ticket, Swift.Result<Operation.Output, DepotError>) -> Void
    ) -> Ticket {
        submit(operation, after: dependencies) { ticket in
            { result in
                let typed = Self.typed(result, as: Operation.Output.self, operation: operation.name)
                Task { @MainActor in completion(ticket, typed) }
            }
        }
    }

    /// Runs an operation and returns its output.
    ///
    /// Cancelling the calling task cancels the operation.
    ///
    /// - Throws: A ``DepotError``.
    public func perform<Operation: NetworkOperation>(
        _ operation: Operation,
        after dependencies: [Ticket] = []
    ) async throws(DepotError) -> Operation.Output {
        let holder = Locked<Ticket?>(nil)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Swift.Result<any Sendable, DepotError>, Never>) in
                let ticket = submit(operation, after: dependencies, startsImmediately: true) { _ in
                    { continuation.resume(returning: $0) }
                }
                holder.withLock { $0 = ticket }
                if Task.isCancelled { ticket.cancel() }
            }
        } onCancel: {
            // Not inline: cancelling runs effects (notifications, logs) that must not
            // run inside the runtime's cancellation handler.
            if let ticket = holder.withLock({ $0 }) {
                Task { ticket.cancel() }
            }
        }
        return try Self.typed(result, as: Operation.Output.self, operation: operation.name).get()
    }

    private static func typed<Output>(_ result: Swift.Result<any Sendable, DepotError>, as: Output.Type, operation: @autoclosure () -> String) -> Swift.Result<Output, DepotError> {
        result.flatMap { value in
            if let output = value as? Output { return .success(output) }
            return .failure(DepotError(.processing, operation: operation(), detail: "output of type \(type(of: value)) is not \(Output.self)"))
        }
    }

    /// - Parameter startsImmediately: Start this ticket's job on the calling thread
    ///   if it can start at once (`perform`: the caller is about to suspend anyway).
    private func submit<Operation: NetworkOperation>(
        _ operation: Operation,
        after dependencies: [Ticket],
        startsImmediately: Bool = false,
        deliver makeDeliver: (Ticket) -> @Sendable (Swift.Result<any Sendable, DepotError>) -> Void
    ) -> Ticket {
        let id = Ticket.ID(rawValue: Self.ticketCounter.wrappingAdd(1, ordering: .relaxed).newValue)
        let name = operation.name
        let ticket = Ticket(id: id, operationName: name) { [weak self] id in self?.cancel(id) }
        let deliver = makeDeliver(ticket)
        let request = operation.request
        let now = timebase.now()

        // Resolve the URL now: the coalescing key needs it, and a bad request fails at once.
        let url: URL
        do {
            url = try request.resolvedURL(baseURL: configuration.baseURL)
        } catch {
            rejectAtOnce(ticket, deliver: deliver, error: error.named(name), at: now)
            return ticket
        }
        let entry = Scheduler.Entry(
            id: id,
            priority: operation.priority,
            category: operation.category,
            exitPolicy: operation.exitPolicy,
            coalescingKey: Self.coalescingKey(for: operation, method: request.method, url: url),
            dependencies: dependencies.map(\.id)
        )
        let runner: JobRunner = { [weak self] environment in
            guard let self else { return JobResult(result: .failure(DepotError(.shutDown, operation: name))) }
            return await self.execute(operation, name: name, request: request, url: url, environment: environment)
        }
        let record = TicketRecord(ticket: ticket, priority: operation.priority, enqueuedAt: now, runner: runner, deliver: deliver)
        let isDroppable = operation.isDroppable
        let offlineBehavior = operation.offlineBehavior

        var effects: [Effect] = []
        state.withLock { state in
            if state.isShutDown {
                effects += resolve(record, .failure(DepotError(.shutDown, operation: name)), outcome: .failed, at: now, counted: false, in: &state)
                return
            }
            // A dependency that already ended decides now; pending ones go to the scheduler.
            for dependency in dependencies {
                guard let outcome = dependency.outcome, outcome != .succeeded else { continue }
                let cause = dependency.state.withLock { $0.failure } ?? DepotError(.cancelled, operation: dependency.operationName)
                effects.append(.emit(event(id, name, .enqueued(priority: entry.priority, category: entry.category), at: now)))
                effects += resolve(record, .failure(DepotError(.dependencyFailed, operation: name, underlying: cause)), outcome: .failed, at: now, in: &state)
                return
            }
            state.records[id] = record
            effects.append(.emit(event(id, name, .enqueued(priority: entry.priority, category: entry.category), at: now)))
            configuration.trace?.enqueued(id, name: name, priority: entry.priority, category: entry.category, at: now)
            let quality = state.conditions.monitor.quality
            if isDroppable {
                // Work that a bad network would drop is not even queued on one.
                if state.conditions.rules.drops(entry.priority, at: quality) {
                    state.records[id] = nil
                    effects += resolve(record, .failure(DepotError(.cancelled, operation: name, detail: "dropped: the network is \(quality)")), outcome: .cancelled, at: now, in: &state)
                    return
                }
                state.conditions.droppable.insert(id)
            }
            if quality == .offline, offlineBehavior == .failFast {
                state.records[id] = nil
                effects += resolve(record, .failure(DepotError(.offline, operation: name, detail: "no network, and the operation fails fast")), outcome: .failed, at: now, in: &state)
                return
            }
            effects += apply(state.scheduler.enqueue(entry), in: &state, at: now, immediate: startsImmediately ? id : nil)
        }
        perform(effects)
        return ticket
    }

    private func rejectAtOnce(_ ticket: Ticket, deliver: @escaping @Sendable (Swift.Result<any Sendable, DepotError>) -> Void, error: DepotError, at now: Duration) {
        ticket.resolve(.failed, failure: error)
        perform([
            .emit(event(ticket.id, ticket.operationName, .failed(error), at: now)),
            .deliver(deliver, .failure(error)),
        ])
    }

    static func coalescingKey<Operation: NetworkOperation>(for operation: Operation, method: HTTPMethod, url: URL) -> String? {
        switch operation.coalescing.base {
        case .never:
            return nil
        case .key(let key):
            return "\(String(reflecting: Operation.self))|key|\(key)"
        case .automatic:
            guard method == .get || method == .head else { return nil }
            return "\(String(reflecting: Operation.self))|\(method.rawValue)|\(url.absoluteString)"
        }
    }

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
            state.conditions.userPaused.insert(category)
            return apply(state.scheduler.pause(category: category), in: &state, at: now)
        }
        perform(effects)
    }

    /// Lets operations in `category` start again.
    /// A category that a quality rule paused stays paused until the network recovers.
    public func resume(category: OperationCategory) {
        let now = timebase.now()
        let effects = state.withLock { state -> [Effect] in
            state.conditions.userPaused.remove(category)
            guard !state.conditions.rulePaused.contains(category) else { return [] }
            return apply(state.scheduler.resume(category: category), in: &state, at: now)
        }
        perform(effects)
    }

    /// The categories currently paused.
    public var pausedCategories: Set<OperationCategory> {
        state.withLock { $0.scheduler.paused }
    }

    /// How many transfers may run at once. Lowering it stops nothing that runs;
    /// raising it starts queued work at once. Setting it replaces the concurrency
    /// policy with a fixed limit (offline still holds everything back).
    public var concurrencyLimit: Int {
        get { state.withLock { $0.scheduler.limit } }
        set {
            let now = timebase.now()
            let effects = state.withLock { state in
                state.conditions.policy = .fixed(newValue)
                return applyEffectiveLimit(in: &state, at: now)
            }
            perform(effects)
        }
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

        /// Makes an activity summary (for previews and tests).
        public init(queued: Int, running: Int, blocked: Int, limit: Int, backingOff: Int = 0) {
            self.queued = queued
            self.running = running
            self.blocked = blocked
            self.limit = limit
            self.backingOff = backingOff
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
                backingOff: state.conditions.backingOff
            )
        }
    }

    /// Everything that happens to operations from now on, as an asynchronous sequence.
    ///
    /// Each access starts a new subscription; events before it are not replayed.
    /// The sequence ends when the controller shuts down.
    public var events: AsyncStream<NetworkEvent> {
        hub.subscribe()
    }

    private func change(_ body: (inout Scheduler) -> [Scheduler.Action]) {
        let now = timebase.now()
        let effects = state.withLock { state in
            let actions = body(&state.scheduler)
            return apply(actions, in: &state, at: now)
        }
        perform(effects)
    }

    // MARK: - Shutdown

    /// The single decision point at exit.
    ///
    /// Cancels at once every operation whose exit policy is `.cancel`, lets
    /// `.finish` operations run for up to `grace`, then cancels what is left and
    /// releases the transport. Afterwards `enqueue` fails with ``DepotError/Code/shutDown``.
    ///
    /// ```swift
    /// let report = await controller.shutdown(grace: .seconds(5))
    /// print(report)   // shutdown: 1 finished, 0 failed, 12 cancelled
    /// ```
    public func shutdown(grace: Duration) async -> ShutdownReport {
        let first = state.withLock { state -> Bool in
            guard !state.isShutDown else { return false }
            state.isShutDown = true
            state.report = ShutdownReport()
            return true
        }
        if first {
            change { $0.shutdown() }
            let timebase = self.timebase
            let drained = await withTaskGroup(of: Bool.self) { group in
                group.addTask { await self.waitUntilIdle(); return true }
                group.addTask {
                    // A cancelled caller ends the grace period early.
                    try? await timebase.sleep(for: grace)
                    return false
                }
                let first = await group.next() ?? true
                group.cancelAll()
                return first
            }
            let idle = state.withLock { $0.scheduler.isIdle && $0.tasks.isEmpty && $0.launching == 0 }
            if !drained && !idle {
                state.withLock { $0.report?.graceExpired = true }
                change { $0.cancelAll() }
            }
        }
        await waitUntilIdle()
        if first {
            state.withLock { $0.probeTask.take() }?.cancel()
            pipeline.watch.stop()
            await configuration.transport.shutdown()
            hub.finish()
        }
        return state.withLock { $0.report ?? ShutdownReport() }
    }

    /// Whether ``shutdown(grace:)`` has been called.
    public var isShutDown: Bool { state.withLock { $0.isShutDown } }

    /// Returns when nothing is queued, blocked or running, or when the calling task is cancelled.
    public func waitUntilIdle() async {
        let key = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if Task.isCancelled || (state.scheduler.isIdle && state.tasks.isEmpty && state.launching == 0) { return true }
                    state.idleWaiters[key] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.idleWaiters.removeValue(forKey: key) }
            waiter?.resume()
        }
        // A cancellation that raced ahead of registration leaves nothing to clean up here:
        // the waiter is resumed either by the handler above or when the queue drains.
    }

    // MARK: - Applying the scheduler's actions

    func apply(_ actions: [Scheduler.Action], in state: inout State, at now: Duration, result: JobResult? = nil, immediate: Ticket.ID? = nil) -> [Effect] {
        var effects: [Effect] = []
        var resolved: [Ticket.ID: Ticket] = [:]
        for action in actions {
            switch action {
            case .start(let job):
                state.launching += 1
                // The job runs the operation of its first ticket still waiting (they share type and key).
                let waiters = state.scheduler.waiters(of: job)
                let records = state.records
                guard let record = records[job] ?? waiters.lazy.compactMap({ records[$0] }).first else { continue }
                for waiter in waiters {
                    guard let name = state.records[waiter]?.ticket.operationName else { continue }
                    state.conditions.droppable.remove(waiter)
                    configuration.trace?.started(waiter, at: now)
                    effects.append(.emit(event(waiter, name, .started(attempt: 1), at: now)))
                }
                // Launched after the events above are emitted, so a job's own events
                // (progress, finished) can never overtake its enqueued and started events.
                effects.append(.launch(job, record.runner, immediately: job == immediate))
            case .abort(let job):
                if let task = state.tasks[job] {
                    effects.append(.cancel(task))
                } else {
                    state.abortedBeforeLaunch.insert(job)
                }
            case .resolve(_, let tickets, let outcome):
                let jobResult = result?.result ?? .failure(DepotError(.cancelled))
                for id in tickets {
                    guard let record = state.records.removeValue(forKey: id) else { continue }
                    var finished: NetworkEvent.Finished?
                    if outcome == .succeeded, let result {
                        finished = NetworkEvent.Finished(status: result.status ?? 0, bytes: result.sample?.bytes ?? 0, duration: now - record.enqueuedAt, sample: result.sample)
                    }
                    effects += resolve(record, jobResult, outcome: outcome, at: now, finished: finished, in: &state)
                    resolved[id] = record.ticket
                }
            case .cancelled(let id):
                guard let record = state.records.removeValue(forKey: id) else { continue }
                effects += resolve(record, .failure(DepotError(.cancelled, operation: record.ticket.operationName)), outcome: .cancelled, at: now, in: &state)
                resolved[id] = record.ticket
            case .dependencyFailed(let id, let cause):
                guard let record = state.records.removeValue(forKey: id) else { continue }
                // The scheduler settles dependents in the same batch that resolves their cause.
                let causeError = resolved[cause]?.state.withLock { $0.failure } ?? DepotError(.cancelled)
                let error = DepotError(.dependencyFailed, operation: record.ticket.operationName, underlying: causeError)
                effects += resolve(record, .failure(error), outcome: .failed, at: now, in: &state)
                resolved[id] = record.ticket
            case .coalesced(let id, let job):
                guard let record = state.records[id] else { continue }
                effects.append(.emit(event(id, record.ticket.operationName, .coalesced(into: job), at: now)))
            case .promoted(let job, let from, let to):
                for waiter in state.scheduler.waiters(of: job) {
                    guard let record = state.records[waiter] else { continue }
                    effects.append(.emit(event(waiter, record.ticket.operationName, .promoted(from: from, to: to), at: now)))
                }
            }
        }
        if state.scheduler.isIdle && state.tasks.isEmpty && state.launching == 0 && !state.idleWaiters.isEmpty {
            effects += state.idleWaiters.values.map(Effect.resume)
            state.idleWaiters.removeAll()
        }
        return effects
    }

    private func resolve(
        _ record: TicketRecord,
        _ result: Swift.Result<any Sendable, DepotError>,
        outcome: Scheduler.Outcome,
        at now: Duration,
        finished: NetworkEvent.Finished? = nil,
        counted: Bool = true,
        in state: inout State
    ) -> [Effect] {
        let ticket = record.ticket
        var effects: [Effect] = []
        state.conditions.droppable.remove(ticket.id)
        if let trace = configuration.trace {
            switch result {
            case .success: trace.finished(ticket.id, at: now, bytes: finished?.bytes ?? 0, outcome: .succeeded)
            case .failure(let error):
                trace.finished(ticket.id, at: now, bytes: 0, outcome: error.code == .cancelled || outcome == .cancelled ? .cancelled : .failed(error.code))
            }
        }
        let logsDebug = configuration.logger.logLevel <= .debug
        let metadata: Logger.Metadata = logsDebug ? ["depot.ticket": "\(ticket.id)", "depot.operation": "\(ticket.operationName)"] : [:]
        switch result {
        case .success:
            ticket.resolve(.succeeded, failure: nil)
            let finished = finished ?? NetworkEvent.Finished(status: 0, bytes: 0, duration: now - record.enqueuedAt, sample: nil)
            effects.append(.emit(event(ticket.id, ticket.operationName, .finished(finished), at: now)))
            if logsDebug {
                effects.append(.log(.debug, "finished", metadata.merging([
                    "http.status": "\(finished.status)", "depot.bytes": "\(finished.bytes)", "depot.duration_ms": "\(finished.duration.milliseconds)",
                ]) { $1 }))
            }
            if counted { state.report?.finished += 1 }
        case .failure(let error):
            let named = error.named(ticket.operationName)
            if named.code == .cancelled || outcome == .cancelled {
                ticket.resolve(.cancelled, failure: named)
                effects.append(.emit(event(ticket.id, ticket.operationName, .cancelled, at: now)))
                if logsDebug { effects.append(.log(.debug, "cancelled", metadata)) }
                if counted { state.report?.cancelled += 1 }
            } else {
                ticket.resolve(.failed, failure: named)
                effects.append(.emit(event(ticket.id, ticket.operationName, .failed(named), at: now)))
                if logsDebug { effects.append(.log(.debug, "failed", metadata.merging(["depot.error": "\(named)"]) { $1 })) }
                if counted { state.report?.failed += 1 }
            }
        }
        effects.append(.deliver(record.deliver, result.mapError { $0.named(ticket.operationName) }))
        return effects
    }

    private func launch(_ job: Ticket.ID, _ runner: @escaping JobRunner, immediately: Bool) {
        let environment = JobEnvironment(
            job: job,
            onProgress: { [weak self] progress in self?.reportProgress(job: job, progress) },
            cancel: { [weak self] in self?.cancelJobTask(job) }
        )
        let work: @Sendable () async -> Void = { [weak self] in
            let outcome = await runner(environment)
            self?.jobEnded(job, outcome)
        }
        let task: Task<Void, Never>
        if immediately, #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
            // `perform` callers are already in an async context: start the job on
            // this thread instead of waking another one (saves a thread hop per request).
            task = Task.immediate { await work() }
        } else {
            task = Task { await work() }
        }
        let (abortNow, idleWaiters) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
            state.launching -= 1
            var abort = false
            if state.endedBeforeStored.remove(job) != nil {
                // An immediate job can end before we get here; nothing to store.
            } else if state.abortedBeforeLaunch.remove(job) != nil {
                abort = true
            } else {
                state.tasks[job] = task
            }
            guard state.scheduler.isIdle && state.tasks.isEmpty && state.launching == 0 else { return (abort, []) }
            defer { state.idleWaiters.removeAll() }
            return (abort, Array(state.idleWaiters.values))
        }
        if abortNow { task.cancel() }
        for waiter in idleWaiters { waiter.resume() }
    }


    /// Cancels a job's task without touching its tickets (a timeout: the job fails, it is not cancelled).
    private func cancelJobTask(_ job: Ticket.ID) {
        let task = state.withLock { state -> Task<Void, Never>? in
            if let task = state.tasks[job] { return task }
            state.abortedBeforeLaunch.insert(job)
            return nil
        }
        task?.cancel()
    }

    private func jobEnded(_ job: Ticket.ID, _ result: JobResult) {
        let now = timebase.now()
        let outcome: Scheduler.Outcome
        switch result.result {
        case .success: outcome = .succeeded
        case .failure(let error): outcome = error.code == .cancelled ? .cancelled : .failed
        }
        let effects = state.withLock { state in
            if state.tasks.removeValue(forKey: job) == nil { state.endedBeforeStored.insert(job) }
            state.abortedBeforeLaunch.remove(job)
            if result.waitsForNetwork, !state.isShutDown, case .failure(let error) = result.result {
                // No network: back to the head of the queue, to run when it returns.
                // The probe that found no network ends with it.
                var effects: [Effect] = state.scheduler.waiters(of: job).compactMap { waiter in
                    guard let name = state.records[waiter]?.ticket.operationName else { return nil }
                    return .emit(event(waiter, name, .waitingForNetwork(error), at: now))
                }
                if state.conditions.isOffline { state.conditions.probing = false }
                effects += applyEffectiveLimit(in: &state, at: now)
                effects += apply(state.scheduler.requeue(job: job), in: &state, at: now)
                return effects
            }
            var effects = apply(state.scheduler.finish(job: job, outcome: outcome), in: &state, at: now, result: result)
            if state.scheduler.runningJobCount == 0, !state.conditions.rulePaused.isEmpty {
                effects += apply(state.scheduler.trickle(from: state.conditions.rulePaused.subtracting(state.conditions.userPaused)), in: &state, at: now)
            }
            return effects
        }
        perform(effects)
    }

    private func reportProgress(job: Ticket.ID, _ progress: TransferProgress) {
        let now = timebase.now()
        let targets = state.withLock { state in
            state.scheduler.waiters(of: job).compactMap { state.records[$0]?.ticket }
        }
        for ticket in targets { ticket.updateProgress(progress) }
        // Progress is the most frequent event: build it only when someone listens.
        guard hub.hasSubscribers || configuration.notificationCenter != nil else { return }
        perform(targets.map { .emit(event($0.id, $0.operationName, .progress(progress), at: now)) })
    }

    func event(_ id: Ticket.ID, _ name: String, _ kind: NetworkEvent.Kind, at now: Duration) -> NetworkEvent {
        NetworkEvent(time: now, ticket: id, operation: name, kind: kind)
    }

    func perform(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .emit(let event):
                hub.emit(event)
                // Progress is too frequent for NotificationCenter; it stays on `events` and `Ticket.progress`.
                if case .progress = event.kind { continue }
                configuration.notificationCenter?.post(name: event.notificationName, object: self, userInfo: event.userInfo)
            case .deliver(let deliver, let result):
                deliver(result)
            case .cancel(let task):
                task.cancel()
            case .launch(let job, let runner, let immediately):
                launch(job, runner, immediately: immediately)
            case .resume(let continuation):
                continuation.resume()
            case .log(let level, let message, let metadata):
                configuration.logger.log(level: level, message, metadata: metadata)
            case .startProbing:
                startProbing()
            }
        }
    }
}
