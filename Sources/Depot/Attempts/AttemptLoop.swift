import Foundation
import Instrumentation
import Logging

/// The attempt loop: one job's attempts, from building the request to the
/// processed output. It owns the request adapters, the authenticator, the
/// transfer pipeline, the interceptors with the retry decision, and the
/// operation's `process`. It never touches the controller's state: what it
/// reports (measurements, backoff, progress) and asks (the retry budget, byte
/// ranges) goes through the ``AttemptHost`` each run is given.
struct AttemptLoop: Sendable {
    let configuration: NetworkController.Configuration
    let pipeline: TransferPipeline
    let timebase: Timebase
    let telemetry: Telemetry
    /// Body bytes received by every transfer of the controller (see ``LinkMeter``).
    let linkBytes: LinkMeter.Counter

    typealias JobEnvironment = NetworkController.JobEnvironment
    typealias JobResult = NetworkController.JobResult
}

/// What the attempt loop tells its controller and asks of it: the whole
/// interface between one job's attempts and the controller's state.
protocol AttemptHost: AnyObject, Sendable {
    /// One attempt's transfer ended: a sample, a transport error, or a bare
    /// response; `accepted` when it passed validation (the retry budget counts it).
    func noteAttempt(sample: TransferSample?, error: DepotError?, accepted: Bool)
    /// Whether the retry budget allows a retry after `delay`.
    func gateRetry(after delay: Duration) -> RetryDecision
    /// The job will be retried after `delay`: its waiters hear it.
    func beginBackoff(job: Ticket.ID, attempt: Int, delay: Duration, error: DepotError)
    /// The job sleeps before its retry; `resting` lends the link to delayable work meanwhile.
    func markBackingOff(job: Ticket.ID, resting: Bool)
    /// A resting job stops lending the link.
    func endRest(job: Ticket.ID)
    /// The job woke for its next attempt (or was cancelled asleep).
    func endBackoff(job: Ticket.ID, nextAttempt: Int)
    /// Until when a sleep of `delay` before `wakeAt` may rest, or `nil`.
    func restEnd(sleeping delay: Duration, until wakeAt: Duration) -> Duration?
    /// The byte ranges of a delayable download, or `nil` when it comes whole.
    func delayableRanges(for request: TransportRequest, priority: Priority, job: Ticket.ID, meter: LinkMeter) -> TransferPipeline.Ranges?
    /// A chunk of a paced delayable job arrived.
    func notePacing(_ latch: PacingLatch, _ progress: TransferProgress)
    /// A chunk arrived: the job's tickets and `events` hear of it.
    func reportProgress(_ running: RunningJob, _ progress: TransferProgress)
    /// The tickets waiting for `job`.
    func waiters(of job: Ticket.ID) -> [Ticket.ID]
    /// What interceptors and the authenticator get: the date, the logger,
    /// jitter from the controller's seeded source, and a way to send a request
    /// (a token refresh).
    func interceptorContext() -> InterceptorContext
}

extension AttemptHost {
    func noteAttempt(sample: TransferSample?, error: DepotError?) {
        noteAttempt(sample: sample, error: error, accepted: false)
    }
}

extension AttemptLoop {
    /// Runs one job's attempts until one is processed, fails for good, or
    /// waits (for the network or for credentials).
    func run<Operation: NetworkOperation>(
        _ operation: Operation,
        name: String,
        request: NetworkRequest,
        url: URL,
        environment: JobEnvironment,
        traceParent: ServiceContext?,
        host: any AttemptHost
    ) async -> JobResult {
        let logger = configuration.observability.logger
        var attempt = 1
        var followsRefresh = false
        while true {
            // The sink of this attempt's streamed body, until it is processed or failed.
            var streamed: (any ResponseBodySink)?
            var streamWasUp = false
            let outcome = await attemptTransfer(operation, name: name, request: request, url: url, attempt: attempt, environment: environment, logger: logger, traceParent: traceParent, host: host, streamWasUp: &streamWasUp)
            // A long-lived stream that was up and then dropped reconnects as if
            // for the first time: hours of service are not failed attempts.
            if streamWasUp { attempt = 1 }
            let intercepted: InterceptedAttempt
            let sample: TransferSample?
            switch outcome {
            case .heldForCredentials(let failure, let generation):
                // Signed out: wait in the queue for new credentials, or fail at once.
                guard operation.offlineBehavior == .waitForConnectivity, !Task.isCancelled else {
                    return JobResult(result: .failure(failure), status: failure.status)
                }
                return JobResult(result: .failure(failure), waitsForCredentials: generation)
            case .response(let response, let transferSample, let sent, let sink):
                // The usual case needs no interceptor: the retry policy passes every response.
                guard configuration.authenticator != nil || !configuration.interceptors.isEmpty else {
                    return await process(operation, name: name, response: response, streamedTo: sink, sent: sent.url, sample: transferSample, attempt: attempt, environment: environment, logger: logger)
                }
                intercepted = InterceptedAttempt(request: sent, outcome: .success(response), responseHeaders: response.headers, attempt: attempt, operationName: name)
                sample = transferSample
                streamed = sink
            case .failed(let failure, let headers, let transferSample, let sent):
                if failure.code == .offline, operation.offlineBehavior == .waitForConnectivity, !Task.isCancelled {
                    return JobResult(result: .failure(failure), waitsForNetwork: true)
                }
                guard !Task.isCancelled, failure.code != .cancelled else {
                    return JobResult(result: .failure(failure), status: failure.status, sample: transferSample)
                }
                intercepted = InterceptedAttempt(request: sent, outcome: .failure(failure), responseHeaders: headers, attempt: attempt, operationName: name)
                sample = transferSample
            }
            var attemptSeen = intercepted
            attemptSeen.followsRefresh = followsRefresh
            let decision = await intercept(attemptSeen, operation: operation, host: host)
            // Anything but processing: a streamed body will not be used.
            if let streamed {
                switch decision.base {
                case .proceed: break  // a streamed body's outcome is a success: it is processed below
                case .fail(let failure): await streamed.fail(failure)
                case .retry, .retryAuthenticated:
                    await streamed.fail(DepotError(Task.isCancelled ? .cancelled : .processing, operation: name, status: intercepted.outcome.status, detail: "an interceptor asked for a retry"))
                }
            }
            let delay: Duration
            switch decision.base {
            case .proceed:
                switch intercepted.outcome {
                case .success(let response):
                    return await process(operation, name: name, response: response, streamedTo: streamed, sent: intercepted.request.url, sample: sample, attempt: attempt, environment: environment, logger: logger)
                case .failure(let failure):
                    return JobResult(result: .failure(failure), status: failure.status, sample: sample)
                }
            case .fail(var failure):
                if failure.operation == nil { failure.operation = name }
                // A token refresh that found no network: the monitor learns it, and
                // the operation waits for the network like any offline request.
                if failure.code == .offline {
                    host.noteAttempt(sample: nil, error: failure)
                    if operation.offlineBehavior == .waitForConnectivity, !Task.isCancelled {
                        return JobResult(result: .failure(failure), waitsForNetwork: true)
                    }
                }
                return JobResult(result: .failure(failure), status: failure.status ?? intercepted.outcome.status, sample: sample)
            case .retryAuthenticated:
                delay = .zero
                followsRefresh = true
            case .retry(let wanted):
                guard case .retry(let granted) = host.gateRetry(after: wanted) else {
                    var failure = intercepted.outcome.error ?? DepotError(.processing, operation: name)
                    failure.detail = failure.detail ?? "\(RetryDecision.Reason.budgetExhausted) after \(attempt) attempt\(attempt == 1 ? "" : "s")"
                    return JobResult(result: .failure(failure), status: failure.status ?? intercepted.outcome.status, sample: sample)
                }
                delay = granted
                followsRefresh = false
            }
            // The wake-up time is fixed now, and the job counts as backing off only
            // right before it sleeps: a simulator driving a test clock may move time
            // while the job is settled, and the events sent in between must not
            // leave a window where it looks asleep but is not.
            let wakeAt = timebase.now() + delay
            let cause = intercepted.outcome.error ?? DepotError(.processing, operation: name, status: intercepted.outcome.status, detail: "an interceptor asked for a retry")
            host.beginBackoff(job: environment.job, attempt: attempt, delay: delay, error: cause)
            let slept: Bool
            do {
                // A long sleep lends the idle link to delayable work, until a
                // margin before the retry; it counts as backing off only while
                // it sleeps, so that a simulator never sees it asleep between.
                if let restEnd = host.restEnd(sleeping: delay, until: wakeAt) {
                    host.markBackingOff(job: environment.job, resting: true)
                    // Cancelled here, the job is still counted once: endBackoff takes it.
                    try await timebase.sleepUntil(restEnd)
                    host.endRest(job: environment.job)
                }
                host.markBackingOff(job: environment.job, resting: false)
                try await timebase.sleepUntil(wakeAt)
                slept = true
            } catch {
                slept = false
            }
            attempt += 1
            host.endBackoff(job: environment.job, nextAttempt: attempt)
            guard slept else { return JobResult(result: .failure(DepotError(.cancelled, operation: name)), status: intercepted.outcome.status) }
        }
    }

    enum AttemptOutcome {
        /// An accepted response; with a sink, its body went there (the response's body is empty).
        case response(NetworkResponse, TransferSample?, sent: TransportRequest, sink: (any ResponseBodySink)?)
        case failed(DepotError, headers: HeaderFields, sample: TransferSample?, sent: TransportRequest)
        /// The authenticator has no credential (signed out): `generation` is its
        /// credential generation then, so a sign-in that came meanwhile is not missed.
        case heldForCredentials(DepotError, generation: Int)
    }

    /// One attempt: build and adapt the request, transfer, validate.
    private func attemptTransfer<Operation: NetworkOperation>(
        _ operation: Operation,
        name: String,
        request: NetworkRequest,
        url: URL,
        attempt: Int,
        environment: JobEnvironment,
        logger: Logger,
        traceParent: ServiceContext?,
        host: any AttemptHost,
        streamWasUp: inout Bool
    ) async -> AttemptOutcome {
        // A function, not a closure value: a closure would be allocated per job even when nothing logs.
        func logMetadata() -> Logger.Metadata { ["depot.ticket": "\(environment.job)", "depot.operation": "\(name)"] }
        // 1. Build and adapt the request.
        var transportRequest = TransportRequest(url: url, method: request.method, headers: request.headers, timeout: operation.timeout.idle)
        if let body = request.body {
            do {
                transportRequest.body = try body.encode()
            } catch {
                return .failed(DepotError.wrap(error, operation: name, fallback: .encoding), headers: [:], sample: nil, sent: transportRequest)
            }
            if let contentType = body.contentType, !transportRequest.headers.contains("Content-Type") {
                transportRequest.headers["Content-Type"] = contentType
            }
        }
        let context = OperationContext(ticket: environment.job, attempt: attempt, now: configuration.environment.date(), logger: logger, values: configuration.contextValues, operationName: name)
        do {
            for adapter in configuration.adapters {
                try await adapter.adapt(&transportRequest)
            }
            if let authenticator = configuration.authenticator {
                try await authenticator.authenticate(&transportRequest, context: host.interceptorContext())
            }
            try await operation.prepare(&transportRequest, context: context)
        } catch let hold as TokenAuthenticator.SignedOut {
            return .heldForCredentials(DepotError(.unauthorized, operation: name, detail: hold.reason), generation: hold.generation)
        } catch {
            let failure = DepotError.wrap(error, operation: name, fallback: .invalidRequest)
            // A token refresh before sending found no network: the monitor learns it.
            if failure.code == .offline { host.noteAttempt(sample: nil, error: failure) }
            return .failed(failure, headers: [:], sample: nil, sent: transportRequest)
        }
        logger.debug("started", metadata: logMetadata().merging(["http.method": "\(transportRequest.method)", "http.url": "\(configuration.observability.redaction.url(transportRequest.url))"]) { $1 })
        logger.trace("request headers", metadata: logMetadata().merging(["http.headers": "\(configuration.observability.redaction.headers(transportRequest.headers))"]) { $1 })

        // 2. Transfer, counting the link's bytes while this body arrives.
        let span = telemetry.startSpan(operation: name, request: &transportRequest, attempt: attempt, parent: traceParent)
        defer { span?.end() }
        let meter = LinkMeter(controller: linkBytes, now: timebase.now)
        defer { meter.finish() }
        let running = environment.running
        // Only a paced delayable job watches its remaining bytes (one allocation for those alone).
        let pacing = configuration.conditions.delayablePacing.isOn && operation.priority <= Scheduler.delayable ? PacingLatch(job: environment.job) : nil
        let chooseSink = bodySinkChooser(for: operation, context: OperationContext(
            ticket: environment.job, attempt: attempt, now: context.now, logger: logger, values: configuration.contextValues, operationName: name, requestURL: transportRequest.url))
        let transfer: TransferPipeline.Result
        // A long-lived stream: no total deadline, no size limit on its sink's
        // body, no progress events, and not a sample of the link (its bytes
        // come when the server has news, not as fast as the link allows).
        let longLived = operation.isLongLived
        let streamUp: Locked<Bool>? = longLived ? Locked(false) : nil
        do {
            let ranges = longLived ? nil : host.delayableRanges(for: transportRequest, priority: operation.priority, job: environment.job, meter: meter)
            let timeout = longLived ? Timeout(idle: operation.timeout.idle) : operation.timeout.capped(at: configuration.limits.longestTransfer)
            transfer = try await pipeline.run(transportRequest, timeout: timeout, streamingTo: chooseSink, inRanges: ranges, limitsStreamedBody: !longLived, cancelOnTimeout: environment.cancel, onHead: { at in
                meter.begin(at: at)
                streamUp?.value = true
            }) { [host] progress in
                meter.record(progress.received)
                guard !longLived else { return }
                if let pacing { host.notePacing(pacing, progress) }
                host.reportProgress(running, progress)
            }
        } catch {
            let failure = DepotError.wrap(error, operation: name, fallback: .transport)
            span?.failed(configuration.observability.redaction.error(failure))  // exported: no secrets
            streamWasUp = streamUp?.value ?? false
            // A stream that was up and dropped says nothing of the link now.
            if !streamWasUp { host.noteAttempt(sample: nil, error: failure) }
            return .failed(failure, headers: [:], sample: nil, sent: transportRequest)
        }
        let response = transfer.response
        span?.responded(status: response.status, bytes: transfer.sample.bytes)
        telemetry.metrics?.received(transfer.sample.bytes, operation: name)
        let linkSample = longLived ? nil : meter.linkSample(for: transfer.sample, minimumBytes: configuration.conditions.monitor.minimumMeasurableBytes)
        if let trace = configuration.observability.trace {
            let sample = transfer.sample
            let firstByte = timebase.now() - sample.transferDuration
            for waiter in host.waiters(of: environment.job) { trace.firstByte(waiter, at: firstByte) }
        }
        logger.trace("response headers", metadata: logMetadata().merging(["http.status": "\(response.status)", "http.headers": "\(configuration.observability.redaction.headers(response.headers))"]) { $1 })

        // 3. Validate. Either way the transfer measured the link; an accepted
        // response also counts toward the retry budget (one lock for both).
        do {
            try operation.validate(response)
        } catch {
            host.noteAttempt(sample: linkSample, error: nil)
            var failure = DepotError.wrap(error, operation: name, fallback: .unexpectedStatus)
            if failure.status == nil { failure.status = response.status }
            await transfer.sink?.fail(failure)
            return .failed(failure, headers: response.headers, sample: transfer.sample, sent: transportRequest)
        }
        host.noteAttempt(sample: linkSample, error: nil, accepted: true)
        return .response(response, transfer.sample, sent: transportRequest, sink: transfer.sink)
    }

    /// Turns an accepted response into the job's result.
    private func process<Operation: NetworkOperation>(
        _ operation: Operation,
        name: String,
        response: NetworkResponse,
        streamedTo sink: (any ResponseBodySink)?,
        sent: URL,
        sample: TransferSample?,
        attempt: Int,
        environment: JobEnvironment,
        logger: Logger
    ) async -> JobResult {
        let transfer = (response: response, sample: sample)
        let context = OperationContext(ticket: environment.job, attempt: attempt, now: configuration.environment.date(), logger: logger, values: configuration.contextValues, operationName: name, requestURL: sent)
        do {
            if let sink {
                guard !Task.isCancelled else {
                    await sink.fail(DepotError(.cancelled, operation: name, status: response.status))
                    throw CancellationError()
                }
                let output = try await Self.process(operation, response, streamedTo: sink, context: context)
                return JobResult(result: .success(output), status: response.status, sample: transfer.sample)
            }
            try Task.checkCancellation()
            let output = try await operation.process(response, context: context)
            return JobResult(result: .success(output), status: response.status, sample: transfer.sample)
        } catch {
            var failure = DepotError.wrap(error, operation: name, fallback: .processing)
            if failure.status == nil { failure.status = response.status }
            if failure.bodyExcerpt == nil, failure.code == .decoding { failure.bodyExcerpt = DepotError.excerpt(of: response.body) }
            return JobResult(result: .failure(failure), status: response.status, sample: transfer.sample)
        }
    }

    /// Asks the interceptors about one attempt, in their documented order:
    /// the authenticator, the configuration's interceptors, the retry policy.
    func intercept<Operation: NetworkOperation>(_ attempt: InterceptedAttempt, operation: Operation, host: any AttemptHost) async -> InterceptorDecision {
        let context = host.interceptorContext()
        if let authenticator = configuration.authenticator {
            let decision = await authenticator.intercept(attempt, context: context)
            guard decision.isProceed else { return decision }
        }
        for interceptor in configuration.interceptors {
            let decision = await interceptor.intercept(attempt, context: context)
            guard decision.isProceed else { return decision }
        }
        return (operation.retryPolicy ?? configuration.retries.policy).verdict(on: attempt, context: context)
    }
}
