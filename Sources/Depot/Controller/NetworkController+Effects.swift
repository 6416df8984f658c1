import Foundation
import Logging

/// Applying the scheduler's actions: effects computed under the lock, then
/// performed outside it (see ARCHITECTURE.md, "Locks and their order").
extension NetworkController {
    // MARK: - Applying the scheduler's actions

    func apply(_ actions: [Scheduler.Action], in state: inout State, at now: Duration, result: JobResult? = nil, immediate: Ticket.ID? = nil) -> [Effect] {
        var effects: [Effect] = []
        effects.reserveCapacity(2 * actions.count)
        apply(actions, in: &state, at: now, result: result, immediate: immediate, into: &effects)
        return effects
    }

    /// Appends the effects of `actions` to `effects` (one array per operation, not one per step).
    /// It reserves nothing itself: callers apply in loops, and an exact reservation
    /// per call would copy the array every time instead of letting it double.
    func apply(_ actions: [Scheduler.Action], in state: inout State, at now: Duration, result: JobResult? = nil, immediate: Ticket.ID? = nil, into effects: inout [Effect]) {
        // Tickets resolved in this batch, for the causes of dependency failures
        // (filled only when the batch has some: the usual batch allocates nothing).
        let tracksCauses = actions.contains { if case .dependencyFailed = $0 { true } else { false } }
        var resolved: [Ticket.ID: Ticket] = [:]
        for action in actions {
            switch action {
            case .start(let job):
                // The job runs the operation of its first ticket still waiting (they share type and key).
                let waiters = state.scheduler.waiters(of: job)
                let records = state.records
                guard let record = records[job] ?? waiters.lazy.compactMap({ records[$0] }).first else { continue }
                let running = RunningJob()
                for waiter in waiters {
                    guard let ticket = state.records[waiter]?.ticket else { continue }
                    running.add(ticket)
                    handle(.ticketLeftQueue(waiter), in: &state, at: now, into: &effects)
                    configuration.observability.trace?.started(waiter, at: now)
                    effects.append(emit(ticket, .started(attempt: 1), at: now))
                }
                state.running[job] = running
                // Launched after the events above are emitted, so a job's own events
                // (progress, finished) can never overtake its enqueued and started events.
                effects.append(.launch(job, record.runner, running, immediately: job == immediate))
            case .abort(let job):
                // First of the batch: the job's task is told before its
                // tickets are resolved, so that a caller whose `perform`
                // returns `.cancelled` finds the job's waits already let go
                // (a download paused between ranges, say).
                if let running = state.running[job] { effects.insert(.cancelJob(running), at: 0) }
            case .resolve(_, let tickets, let outcome):
                let jobResult = result?.result ?? .failure(DepotError(.cancelled))
                for id in tickets {
                    guard let record = state.records.removeValue(forKey: id) else { continue }
                    var finished: NetworkEvent.Finished?
                    if outcome == .succeeded, let result {
                        finished = NetworkEvent.Finished(status: result.status ?? 0, bytes: result.sample?.bytes ?? 0, duration: now - record.enqueuedAt, sample: result.sample)
                    }
                    resolve(record, jobResult, outcome: outcome, at: now, finished: finished, in: &state, into: &effects)
                    if tracksCauses { resolved[id] = record.ticket }
                }
            case .cancelled(let id):
                guard let record = state.records.removeValue(forKey: id) else { continue }
                resolve(record, .failure(DepotError(.cancelled, operation: record.ticket.operationName)), outcome: .cancelled, at: now, in: &state, into: &effects)
                if tracksCauses { resolved[id] = record.ticket }
            case .dependencyFailed(let id, let cause):
                guard let record = state.records.removeValue(forKey: id) else { continue }
                // The scheduler settles dependents in the same batch that resolves their cause.
                let causeError = resolved[cause]?.state.withLock { $0.failure } ?? DepotError(.cancelled)
                let error = DepotError(.dependencyFailed, operation: record.ticket.operationName, underlying: causeError)
                resolve(record, .failure(error), outcome: .failed, at: now, in: &state, into: &effects)
                if tracksCauses { resolved[id] = record.ticket }
            case .coalesced(let id, let job):
                guard let record = state.records[id] else { continue }
                state.running[job]?.add(record.ticket)  // A running job: progress reaches this ticket too.
                effects.append(emit(record.ticket, .coalesced(into: job), at: now))
            case .promoted(let job, let from, let to):
                for waiter in state.scheduler.waiters(of: job) {
                    guard let record = state.records[waiter] else { continue }
                    effects.append(emit(record.ticket, .promoted(from: from, to: to), at: now))
                }
                // No longer delayable: a download paused between byte ranges goes on now,
                // not when the urgent job it waited for ends.
                for (id, waiter) in state.rangeWaiters where waiter.job == job && state.scheduler.mayContinueRanges(of: job) {
                    state.rangeWaiters[id] = nil
                    effects.append(.resume(waiter.continuation))
                }
            }
        }
        if state.isIdle && !state.idleWaiters.isEmpty {
            effects += state.idleWaiters.values.map(Effect.resume)
            state.idleWaiters.removeAll()
        }
    }

    func resolve(
        _ record: TicketRecord,
        _ result: Swift.Result<any Sendable, DepotError>,
        outcome: Scheduler.Outcome,
        at now: Duration,
        finished: NetworkEvent.Finished? = nil,
        counted: Bool = true,
        in state: inout State,
        into effects: inout [Effect]
    ) {
        let ticket = record.ticket
        handle(.ticketLeftQueue(ticket.id), in: &state, at: now, into: &effects)
        if let trace = configuration.observability.trace {
            switch result {
            case .success: trace.finished(ticket.id, at: now, bytes: finished?.bytes ?? 0, outcome: .succeeded)
            case .failure(let error):
                trace.finished(ticket.id, at: now, bytes: 0, outcome: error.code == .cancelled || outcome == .cancelled ? .cancelled : .failed(error.code))
            }
        }
        let logsDebug = configuration.observability.logger.logLevel <= .debug
        let metadata: Logger.Metadata = logsDebug ? ["depot.ticket": "\(ticket.id)", "depot.operation": "\(ticket.operationName)"] : [:]
        switch result {
        case .success:
            ticket.resolve(.succeeded, failure: nil)
            let finished = finished ?? NetworkEvent.Finished(status: 0, bytes: 0, duration: now - record.enqueuedAt, sample: nil)
            effects.append(emit(ticket, .finished(finished), at: now))
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
                effects.append(emit(ticket, .cancelled, at: now))
                if logsDebug { effects.append(.log(.debug, "cancelled", metadata)) }
                if counted { state.report?.cancelled += 1 }
            } else {
                ticket.resolve(.failed, failure: named)
                effects.append(emit(ticket, .failed(named), at: now))
                if logsDebug { effects.append(.log(.debug, "failed", metadata.merging(["depot.error": "\(named)"]) { $1 })) }
                if counted { state.report?.failed += 1 }
            }
        }
        effects.append(.deliver(record.deliver, result.mapError { $0.named(ticket.operationName) }))
    }

    private func launch(_ job: Ticket.ID, _ runner: @escaping JobRunner, _ running: RunningJob, immediately: Bool) {
        let environment = JobEnvironment(job: job, running: running, cancel: { running.cancel() })
        // The body is written twice: a shared closure would cost an allocation per
        // job (AllocationTests guards it). A running job keeps its controller alive until it has ended and
        // delivered (a URLSession task keeps its session alive the same way).
        let task: Task<Void, Never>
        if immediately, #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
            // `perform` callers are already in an async context: start the job on
            // this thread instead of waking another one (saves a thread hop per request).
            task = Task.immediate {
                let outcome = await runner(environment)
                self.jobEnded(job, outcome)
            }
        } else {
            task = Task {
                let outcome = await runner(environment)
                self.jobEnded(job, outcome)
            }
        }
        // The job's own lock, not the controller's: an abort that came first cancels it now.
        if !running.store(task) { task.cancel() }
    }

    private func jobEnded(_ job: Ticket.ID, _ result: JobResult) {
        var result = result
        // Every failure a job reports reaches events, notifications, logs and its
        // callers from here: its secrets go now, outside the lock.
        if case .failure(let error) = result.result { result.result = .failure(configuration.observability.redaction.error(error)) }
        let now = timebase.now()
        let outcome: Scheduler.Outcome
        switch result.result {
        case .success: outcome = .succeeded
        case .failure(let error): outcome = error.code == .cancelled ? .cancelled : .failed
        }
        let effects = state.withLock { state in
            state.running.removeValue(forKey: job)?.end()
            if let generation = result.waitsForCredentials, !state.isShutDown, case .failure(let error) = result.result {
                // Signed out: back to the queue, held until a sign-in. A sign-in that
                // came after the job found no credential lets it go at once.
                var effects: [Effect] = state.scheduler.waiters(of: job).compactMap { waiter in
                    guard let ticket = state.records[waiter]?.ticket else { return nil }
                    return emit(ticket, .waitingForCredentials(error), at: now)
                }
                let signedInSince = configuration.authenticator.map { $0.generation != generation } ?? true
                apply(state.scheduler.requeue(job: job, holding: !signedInSince), in: &state, at: now, into: &effects)
                return effects
            }
            if result.waitsForNetwork, state.runsWork, case .failure(let error) = result.result {
                // No network: back to the queue (behind its peers), to run when it returns.
                // The probe that found no network ends with it.
                var effects: [Effect] = state.scheduler.waiters(of: job).compactMap { waiter in
                    guard let ticket = state.records[waiter]?.ticket else { return nil }
                    return emit(ticket, .waitingForNetwork(error), at: now)
                }
                handle(.probeFoundNoNetwork, in: &state, at: now, into: &effects)
                apply(state.scheduler.requeue(job: job), in: &state, at: now, into: &effects)
                return effects
            }
            var effects = apply(state.scheduler.finish(job: job, outcome: outcome), in: &state, at: now, result: result)
            if state.conditions.isOffline, state.conditions.probing, case .failure(let error) = result.result, error.code == .offline {
                // A fail-fast probe found no network: the probe window closes again.
                handle(.probeFoundNoNetwork, in: &state, at: now, into: &effects)
            }
            if state.scheduler.runningSlottedJobCount == 0, !state.conditions.trickling.isEmpty {
                apply(state.scheduler.trickle(from: state.conditions.trickling), in: &state, at: now, into: &effects)
            }
            return effects
        }
        perform(effects)
        releaseRangeWaiters()
    }

    /// A chunk arrived. Takes no controller lock: chunks are the most frequent
    /// thing that happens, on every running transfer at once.
    func reportProgress(_ running: RunningJob, _ progress: TransferProgress) {
        let tickets = running.tickets
        // Progress is not posted as a notification: build events only for `events` subscribers.
        guard hub.hasSubscribers else {
            for ticket in tickets { _ = ticket.updateProgressIfOpen(progress) }
            return
        }
        let open = tickets.filter { $0.updateProgressIfOpen(progress) }
        guard !open.isEmpty else { return }
        let now = timebase.now()
        // Not numbered: progress goes out between a ticket's `enqueued` and its end (see EventOrder).
        perform(open.map { .emit(NetworkEvent(time: now, ticket: $0.id, operation: $0.operationName, detail: .progress(progress)), $0) })
    }

    /// An event of `ticket`, numbered: call it under the controller's lock, in
    /// the order things happen, and perform the effect (an unperformed one
    /// would hold back the ticket's later events).
    func emit(_ ticket: Ticket, _ detail: NetworkEvent.Detail, at now: Duration) -> Effect {
        .emit(NetworkEvent(time: now, ticket: ticket.id, operation: ticket.operationName, detail: detail, sequence: ticket.numberEvent()), ticket)
    }

    /// Hands `event` to `events` subscribers and posts its notification.
    private func publish(_ event: NetworkEvent) {
        hub.emit(event)
        telemetry.metrics?.observe(event)
        // Progress is too frequent for NotificationCenter; it stays on `events` and `Ticket.progress`.
        if case .progress = event.detail { return }
        configuration.observability.notificationCenter?.post(name: event.notificationName, object: self, userInfo: event.userInfo)
    }

    func perform(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .emit(let event, let ticket?):
                ticket.deliverInOrder(event, publish)
            case .emit(let event, nil):
                publish(event)
            case .deliver(let deliver, let result):
                deliver(result)
            case .cancel(let task):
                task.cancel()
            case .cancelJob(let running):
                running.cancel()
            case .launch(let job, let runner, let running, let immediately):
                launch(job, runner, running, immediately: immediately)
            case .resume(let continuation):
                continuation.resume()
            case .log(let level, let message, let metadata):
                configuration.observability.logger.log(level: level, message, metadata: metadata)
            case .startProbing:
                startProbing()
            }
        }
    }
}
