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
    /// The base URL, prepared once for resolving every request's path.
    let base: BaseURL?
    let hub: EventHub
    let pipeline: TransferPipeline
    let state: Mutex<State>
    /// The monitor, policy and retry budget (see ``Measurements``: taken inside
    /// `state`'s lock, never around it).
    let measurements: Mutex<Measurements>

    /// Made once per job, at enqueue, around the concrete operation type.
    typealias JobRunner = @Sendable (JobEnvironment) async -> JobResult

    struct JobEnvironment: Sendable {
        let job: Ticket.ID
        /// The job's tickets (for progress) and task.
        let running: RunningJob
        /// Cancels the job's own task (used when its transfer times out).
        let cancel: @Sendable () -> Void
    }

    struct JobResult: Sendable {
        var result: Swift.Result<any Sendable, DepotError>
        var status: Int?
        var sample: TransferSample?
        /// The transfer found no network and the operation waits for it: back to the queue.
        var waitsForNetwork = false
        /// The authenticator had no credential (at this generation): the job
        /// waits in the queue for a sign-in.
        var waitsForCredentials: Int?
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
        /// Jobs from their start action until they end (or go back to the queue).
        var running: [Ticket.ID: RunningJob] = [:]
        /// Jobs sleeping between attempts (a retry's backoff).
        var backingOff = 0
        var isShutDown = false
        /// From `shutdown(grace:)` until its grace ends: work admitted during
        /// the grace (an outbox's next send) may still be queued.
        var graceOpen = false
        /// Whether queued work may still run: before shutdown, and through its
        /// grace (when offline probes go on, so that `.finish` work waiting
        /// for the network runs if it comes back in time).
        var runsWork: Bool { !isShutDown || graceOpen }
        /// What the grace also waits for (outboxes' delivery loops), by registration.
        var exitParticipants: [UInt64: @Sendable () async -> Void] = [:]
        /// Called when credentials come back: a sign-in or a successful refresh.
        var credentialsListeners: [@Sendable () -> Void] = []
        var report: ShutdownReport?
        var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Delayable downloads waiting to ask for their next byte range while
        /// urgent work runs (see ``DelayablePacing``), by registration.
        var rangeWaiters: [UInt64: (job: Ticket.ID, continuation: CheckedContinuation<Void, Never>)] = [:]
        /// Who waits for a download to pause between ranges (`waitUntilPausedBetweenRanges`).
        var rangePauseWatchers: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var conditions: ConditionsState
        /// The offline probe loop, while offline.
        var probeTask: Task<Void, Never>?
        var nextWaiter: UInt64 = 0

        /// Nothing queued, blocked or running.
        var isIdle: Bool { scheduler.isIdle && running.isEmpty }
    }

    /// What to do outside the lock. Resuming continuations and cancelling tasks
    /// take the Swift runtime's task locks, so they must never run under ours.
    enum Effect {
        /// An event, with its ticket (which delivers it in order), or `nil` for a controller-wide one.
        case emit(NetworkEvent, Ticket?)
        case cancel(Task<Void, Never>)
        case cancelJob(RunningJob)
        case resume(CheckedContinuation<Void, Never>)
        case launch(Ticket.ID, JobRunner, RunningJob, immediately: Bool)
        case deliver(@Sendable (Swift.Result<any Sendable, DepotError>) -> Void, Swift.Result<any Sendable, DepotError>)
        case log(Logger.Level, Logger.Message, Logger.Metadata)
        case startProbing
    }

    private static let ticketCounter = Atomic<UInt64>(0)
    /// The delayable pacing budget in bytes, from the last measurement; -1
    /// while unknown (see ``DelayablePacing``). Read on every chunk of a
    /// delayable job, so it is an atomic and not under a lock.
    let pacingBudget = Atomic<Int64>(-1)
    /// Metrics and spans through the standard packages, when a backend is configured.
    let telemetry: Telemetry
    /// Runs each job's attempts; this controller is its ``AttemptHost``.
    let attempts: AttemptLoop

    /// Makes a controller.
    public init(configuration: Configuration = Configuration()) {
        var configuration = configuration
        // Resolve relative paths against a directory URL once, not per request.
        configuration.baseURL = configuration.baseURL?.appendingSlashIfNeeded()
        self.configuration = configuration
        self.base = configuration.baseURL.map { BaseURL($0) }
        let timebase = Timebase(configuration.environment.clock)
        self.timebase = timebase
        self.hub = EventHub(bufferSize: configuration.observability.eventBufferSize)
        let pipeline = TransferPipeline(
            transport: configuration.transport,
            timebase: timebase,
            maximumBodySize: configuration.limits.maximumBodySize,
            redirectLimit: configuration.limits.redirects,
            watch: DeadlineWatch(timebase: timebase),
            redaction: configuration.observability.redaction
        )
        let measurements = Measurements(configuration: configuration)
        let conditions = ConditionsState(quality: measurements.monitor.quality, policyLimit: measurements.policy.limit, rules: configuration.conditions.rules)
        configuration.observability.trace?.quality(conditions.quality, at: .zero)
        let telemetry = Telemetry(factory: configuration.observability.metricsFactory, tracer: configuration.observability.tracer, quality: conditions.quality, limit: conditions.effectiveLimit)
        self.pipeline = pipeline
        self.telemetry = telemetry
        self.attempts = AttemptLoop(configuration: configuration, pipeline: pipeline, timebase: timebase, telemetry: telemetry, linkBytes: LinkMeter.Counter())
        self.measurements = Mutex(measurements)
        self.state = Mutex(State(scheduler: Scheduler(limit: conditions.effectiveLimit, pacesDelayable: configuration.conditions.delayablePacing.isOn), conditions: conditions))
        configuration.authenticator?.attach(self)
    }

    /// Work still held when the last reference goes (in a paused category,
    /// waiting for the network or for a dependency) fails with
    /// ``DepotError/Code/shutDown``, so every completion is still called once.
    /// No job is running here: a running job keeps its controller alive. (A
    /// completion that captures the controller keeps it alive too, and then
    /// this never runs; ``shutdown(grace:)`` ends held work deliberately.)
    deinit {
        let (records, probe) = state.withLock { state in (Array(state.records.values), state.probeTask.take()) }
        probe?.cancel()
        for record in records {
            let error = DepotError(.shutDown, operation: record.ticket.operationName, detail: "the controller was released")
            record.ticket.resolve(.failed, failure: error)
            record.deliver(.failure(error))
        }
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
        try await perform(operation, after: dependencies, admittedDuringGrace: false)
    }

    /// ``perform(_:after:)`` for a participant of the grace period (an
    /// outbox): once ``shutdown(grace:)`` began, a `.finish` operation is
    /// still admitted until the grace ends.
    ///
    /// `onEvent` sees the ticket's events in order, before subscribers do.
    package func perform<Operation: NetworkOperation>(
        _ operation: Operation,
        after dependencies: [Ticket] = [],
        admittedDuringGrace: Bool,
        onEvent: (@Sendable (NetworkEvent) -> Void)? = nil
    ) async throws(DepotError) -> Operation.Output {
        // The ticket exists before the handler, so the handler needs no lock to find it.
        let ticket = makeTicket(for: operation, tap: onEvent)
        let result = await withTaskCancellationHandler {
            // Unsafe (one allocation fewer, which AllocationTests guards): `deliver` runs
            // exactly once, as `completionRunsOnMainActorAsynchronouslyExactlyOnce` checks.
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Swift.Result<any Sendable, DepotError>, Never>) in
                submit(operation, ticket: ticket, after: dependencies, startsImmediately: true, admittedDuringGrace: admittedDuringGrace) { _ in
                    { continuation.resume(returning: $0) }
                }
                // A cancellation that came before the ticket was queued found nothing to cancel.
                if Task.isCancelled { ticket.cancel() }
            }
        } onCancel: {
            // Not inline: cancelling runs effects (notifications, logs) that must not
            // run inside the runtime's cancellation handler. Cancelling a ticket that is
            // not queued yet, or twice, does nothing.
            Task { ticket.cancel() }
        }
        return try Self.typed(result, as: Operation.Output.self, operation: operation.name).get()
    }

    static func typed<Output>(_ result: Swift.Result<any Sendable, DepotError>, as: Output.Type, operation: @autoclosure () -> String) -> Swift.Result<Output, DepotError> {
        result.flatMap { value in
            if let output = value as? Output { return .success(output) }
            return .failure(DepotError(.processing, operation: operation(), detail: "output of type \(type(of: value)) is not \(Output.self)"))
        }
    }

    func makeTicket<Operation: NetworkOperation>(for operation: Operation, tap: (@Sendable (NetworkEvent) -> Void)? = nil) -> Ticket {
        let id = Ticket.ID(rawValue: Self.ticketCounter.wrappingAdd(1, ordering: .relaxed).newValue)
        return Ticket(id: id, operationName: operation.name, controller: self, tap: tap)
    }

    /// - Parameters:
    ///   - ticket: The ticket to queue; a new one if `nil`.
    ///   - startsImmediately: Start this ticket's job on the calling thread
    ///     if it can start at once (`perform`: the caller is about to suspend anyway).
    @discardableResult
    func submit<Operation: NetworkOperation>(
        _ operation: Operation,
        ticket: Ticket? = nil,
        after dependencies: [Ticket],
        startsImmediately: Bool = false,
        admittedDuringGrace: Bool = false,
        deliver makeDeliver: (Ticket) -> @Sendable (Swift.Result<any Sendable, DepotError>) -> Void
    ) -> Ticket {
        let ticket = ticket ?? makeTicket(for: operation)
        let id = ticket.id
        let name = ticket.operationName
        let deliver = makeDeliver(ticket)
        let request = operation.request
        let now = timebase.now()

        // Resolve the URL now: the coalescing key needs it, and a bad request fails at once.
        let url: URL
        do {
            url = try request.resolvedURL(base: base)
        } catch {
            // After shutdown every operation fails the same way, a malformed one too.
            let failure = isShutDown ? DepotError(.shutDown, operation: name) : configuration.observability.redaction.error(error.named(name))
            rejectAtOnce(ticket, priority: operation.priority, category: operation.category, deliver: deliver, error: failure, at: now)
            return ticket
        }
        let entry = Scheduler.Entry(
            id: id,
            priority: operation.priority,
            category: operation.category,
            // A long-lived stream never holds up shutdown, whatever it asks.
            exitPolicy: operation.isLongLived ? .cancel : operation.exitPolicy,
            coalescingKey: Self.coalescingKey(for: operation, method: request.method, url: url),
            dependencies: dependencies.map(\.id),
            holdsSlot: !operation.isLongLived
        )
        let traceParent = telemetry.parentContext()
        let runner: JobRunner = { [weak self] environment in
            guard let self else { return JobResult(result: .failure(DepotError(.shutDown, operation: name))) }
            return await self.attempts.run(operation, name: name, request: request, url: url, environment: environment, traceParent: traceParent, host: self)
        }
        let record = TicketRecord(ticket: ticket, priority: operation.priority, enqueuedAt: now, runner: runner, deliver: deliver)
        let isDroppable = operation.isDroppable
        let offlineBehavior = operation.offlineBehavior

        var effects: [Effect] = []
        effects.reserveCapacity(4)  // enqueued, started, launch: one allocation
        state.withLock { state in
            let admitted = admittedDuringGrace && state.graceOpen && entry.exitPolicy == .finish
            if state.isShutDown && !admitted {
                effects.append(emit(ticket, .enqueued(priority: entry.priority, category: entry.category), at: now))
                resolve(record, .failure(DepotError(.shutDown, operation: name)), outcome: .failed, at: now, counted: false, in: &state, into: &effects)
                return
            }
            // A dependency that already ended decides now; pending ones go to the scheduler.
            for dependency in dependencies {
                guard let outcome = dependency.outcome, outcome != .succeeded else { continue }
                let cause = dependency.state.withLock { $0.failure } ?? DepotError(.cancelled, operation: dependency.operationName)
                effects.append(emit(ticket, .enqueued(priority: entry.priority, category: entry.category), at: now))
                resolve(record, .failure(DepotError(.dependencyFailed, operation: name, underlying: cause)), outcome: .failed, at: now, in: &state, into: &effects)
                return
            }
            state.records[id] = record
            effects.append(emit(ticket, .enqueued(priority: entry.priority, category: entry.category), at: now))
            configuration.observability.trace?.enqueued(id, name: configuration.observability.redaction.text(name), priority: entry.priority, category: entry.category, at: now)
            let quality = state.conditions.quality
            if isDroppable {
                // Work that a bad network would drop is not even queued on one.
                if state.conditions.drops(entry.priority) {
                    state.records[id] = nil
                    resolve(record, .failure(DepotError(.cancelled, operation: name, detail: "dropped: the network is \(quality)")), outcome: .cancelled, at: now, in: &state, into: &effects)
                    return
                }
                handle(.droppableQueued(id), in: &state, at: now, into: &effects)
            }
            if quality == .offline, offlineBehavior == .failFast {
                guard state.scheduler.isIdle, !state.scheduler.paused.contains(entry.category) else {
                    // Queued work will find out when the network is back (the probes let it
                    // try); an operation that could not start now would wait, not fail fast.
                    state.records[id] = nil
                    resolve(record, .failure(DepotError(.offline, operation: name, detail: "no network, and the operation fails fast")), outcome: .failed, at: now, in: &state, into: &effects)
                    return
                }
                // Nothing queued could ever probe: an app of fail-fast operations would
                // stay offline for good. This operation is the probe; it runs alone.
                handle(.failFastProbeAdmitted, in: &state, at: now, into: &effects)
            }
            apply(state.scheduler.enqueue(entry), in: &state, at: now, immediate: startsImmediately ? id : nil, into: &effects)
        }
        perform(effects)
        return ticket
    }

    private func rejectAtOnce(
        _ ticket: Ticket, priority: Priority, category: OperationCategory,
        deliver: @escaping @Sendable (Swift.Result<any Sendable, DepotError>) -> Void, error: DepotError, at now: Duration
    ) {
        ticket.resolve(.failed, failure: error)
        // Every ticket's story starts with `enqueued`, a refused one's too.
        perform([
            emit(ticket, .enqueued(priority: priority, category: category), at: now),
            emit(ticket, .failed(error), at: now),
            .deliver(deliver, .failure(error)),
        ])
    }

    /// Keys are compared only within this process, so the operation's type is
    /// named by its metadata address: no type name to work out per request.
    static func coalescingKey<Operation: NetworkOperation>(for operation: Operation, method: NetworkRequest.Method, url: URL) -> String? {
        var type: String { String(UInt(bitPattern: ObjectIdentifier(Operation.self)), radix: 16) }
        switch operation.coalescing.base {
        case .never:
            return nil
        case .key(let key):
            return "\(type)|key|\(key)"
        case .automatic:
            guard method == .get || method == .head else { return nil }
            return "\(type)|\(method.rawValue)|\(url.absoluteString)"
        }
    }
}
