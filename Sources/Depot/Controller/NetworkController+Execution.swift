import Foundation
import Instrumentation
import Logging
import Synchronization

extension NetworkController {
    /// Runs one job: build the request, adapt it, transfer, validate, ask the
    /// interceptors, process.
    func execute<Operation: NetworkOperation>(
        _ operation: Operation,
        name: String,
        request: NetworkRequest,
        url: URL,
        environment: JobEnvironment,
        traceParent: ServiceContext?
    ) async -> JobResult {
        let logger = configuration.logger
        var attempt = 1
        var followsRefresh = false
        while true {
            // The sink of this attempt's streamed body, until it is processed or failed.
            var streamed: (any ResponseBodySink)?
            let outcome = await attemptTransfer(operation, name: name, request: request, url: url, attempt: attempt, environment: environment, logger: logger, traceParent: traceParent)
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
            let decision = await intercept(attemptSeen, operation: operation)
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
                    noteAttempt(sample: nil, error: failure)
                    if operation.offlineBehavior == .waitForConnectivity, !Task.isCancelled {
                        return JobResult(result: .failure(failure), waitsForNetwork: true)
                    }
                }
                return JobResult(result: .failure(failure), status: failure.status ?? intercepted.outcome.status, sample: sample)
            case .retryAuthenticated:
                delay = .zero
                followsRefresh = true
            case .retry(let wanted):
                guard case .retry(let granted) = gateRetry(after: wanted) else {
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
            beginBackoff(job: environment.job, attempt: attempt, delay: delay, error: cause)
            let slept: Bool
            do {
                // A long sleep lends the idle link to delayable work, until a
                // margin before the retry; it counts as backing off only while
                // it sleeps, so that a simulator never sees it asleep between.
                if let restEnd = restEnd(sleeping: delay, until: wakeAt) {
                    markBackingOff(job: environment.job, resting: true)
                    // Cancelled here, the job is still counted once: endBackoff takes it.
                    try await timebase.sleepUntil(restEnd)
                    endRest(job: environment.job)
                }
                markBackingOff(job: environment.job, resting: false)
                try await timebase.sleepUntil(wakeAt)
                slept = true
            } catch {
                slept = false
            }
            attempt += 1
            endBackoff(job: environment.job, nextAttempt: attempt)
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
        traceParent: ServiceContext?
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
        let context = OperationContext(ticket: environment.job, attempt: attempt, now: configuration.currentDate(), logger: logger, values: configuration.contextValues, operationName: name)
        do {
            for adapter in configuration.adapters {
                try await adapter.adapt(&transportRequest)
            }
            if let authenticator = configuration.authenticator {
                try await authenticator.authenticate(&transportRequest, context: interceptorContext())
            }
            try await operation.prepare(&transportRequest, context: context)
        } catch let hold as TokenAuthenticator.SignedOut {
            return .heldForCredentials(DepotError(.unauthorized, operation: name, detail: hold.reason), generation: hold.generation)
        } catch {
            let failure = DepotError.wrap(error, operation: name, fallback: .invalidRequest)
            // A token refresh before sending found no network: the monitor learns it.
            if failure.code == .offline { noteAttempt(sample: nil, error: failure) }
            return .failed(failure, headers: [:], sample: nil, sent: transportRequest)
        }
        logger.debug("started", metadata: logMetadata().merging(["http.method": "\(transportRequest.method)", "http.url": "\(configuration.redaction.url(transportRequest.url))"]) { $1 })
        logger.trace("request headers", metadata: logMetadata().merging(["http.headers": "\(configuration.redaction.headers(transportRequest.headers))"]) { $1 })

        // 2. Transfer, counting the link's bytes while this body arrives.
        let span = startSpan(operation: name, request: &transportRequest, attempt: attempt, parent: traceParent)
        defer { span?.end() }
        let meter = LinkMeter(controller: linkBytes, now: timebase.now)
        defer { meter.finish() }
        let running = environment.running
        // Only a paced delayable job watches its remaining bytes (one allocation for those alone).
        let pacing = configuration.delayablePacing.isOn && operation.priority <= Scheduler.delayable ? PacingLatch(job: environment.job) : nil
        let chooseSink = bodySinkChooser(for: operation, context: OperationContext(
            ticket: environment.job, attempt: attempt, now: context.now, logger: logger, values: configuration.contextValues, operationName: name, requestURL: transportRequest.url))
        let transfer: TransferPipeline.Result
        do {
            let ranges = delayableRanges(for: transportRequest, priority: operation.priority, job: environment.job, meter: meter)
            transfer = try await pipeline.run(transportRequest, timeout: operation.timeout.capped(at: configuration.longestTransfer), streamingTo: chooseSink, inRanges: ranges, cancelOnTimeout: environment.cancel, onHead: meter.begin) { [weak self] progress in
                meter.record(progress.received)
                if let pacing { self?.notePacing(pacing, progress) }
                self?.reportProgress(running, progress)
            }
        } catch {
            let failure = DepotError.wrap(error, operation: name, fallback: .transport)
            span?.failed(configuration.redaction.error(failure))  // exported: no secrets
            noteAttempt(sample: nil, error: failure)
            return .failed(failure, headers: [:], sample: nil, sent: transportRequest)
        }
        let response = transfer.response
        span?.responded(status: response.status, bytes: transfer.sample.bytes)
        telemetry.metrics?.received(transfer.sample.bytes, operation: name)
        let linkSample = meter.linkSample(for: transfer.sample, minimumBytes: configuration.monitor.minimumMeasurableBytes)
        if let trace = configuration.trace {
            let sample = transfer.sample
            let firstByte = timebase.now() - sample.transferDuration
            for waiter in waiters(of: environment.job) { trace.firstByte(waiter, at: firstByte) }
        }
        logger.trace("response headers", metadata: logMetadata().merging(["http.status": "\(response.status)", "http.headers": "\(configuration.redaction.headers(response.headers))"]) { $1 })

        // 3. Validate. Either way the transfer measured the link; an accepted
        // response also counts toward the retry budget (one lock for both).
        do {
            try operation.validate(response)
        } catch {
            noteAttempt(sample: linkSample, error: nil)
            var failure = DepotError.wrap(error, operation: name, fallback: .unexpectedStatus)
            if failure.status == nil { failure.status = response.status }
            await transfer.sink?.fail(failure)
            return .failed(failure, headers: response.headers, sample: transfer.sample, sent: transportRequest)
        }
        noteAttempt(sample: linkSample, error: nil, accepted: true)
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
        let context = OperationContext(ticket: environment.job, attempt: attempt, now: configuration.currentDate(), logger: logger, values: configuration.contextValues, operationName: name, requestURL: sent)
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
}

/// Measures the LINK, not one transfer: with four transfers sharing a
/// 2 Mbit/s link each one sees 500 kbit/s, but the link is still a 2 Mbit/s
/// link. The controller counts every body byte and the time during which at
/// least one body was arriving ("busy" time: round trips with no body in flight
/// do not count). When a measurable transfer ends, the bytes and busy time since
/// the previous sample become one sample, if there is enough of both.
final class LinkMeter: Sendable {
    /// The shortest busy time a link sample may cover: bodies arrive in chunks,
    /// so a short window counts whole chunks whose bytes crossed the link
    /// before it. On a link slower than 20 Mbit/s the sample's bytes take
    /// longer than this anyway; on a fast one, whose busy spells are short,
    /// 100 ms kept the first estimate away for 160 ms, and delayable downloads
    /// came in small blind ranges meanwhile.
    static let minimumWindow = Duration.milliseconds(25)
    /// The fewest chunks a link sample may hold: its first chunk's bytes
    /// crossed the link before the window, so with eight a sample overstates
    /// the link by at most an eighth, however large the transport's reads
    /// (64 KB on a fast link read 1.77 times a 10 Mbit/s link over 25 ms).
    static let minimumChunks: Int64 = 8

    /// The controller's running totals.
    final class Counter: Sendable {
        private struct State {
            var bytes: Int64 = 0
            var chunks: Int64 = 0
            var active = 0
            var busy: Duration = .zero
            var busySince: Duration = .zero
            var lastSample: (busy: Duration, bytes: Int64, chunks: Int64) = (.zero, 0, 0)
        }

        private let state = Mutex(State())

        /// A transfer's body begins to arrive at `time` (its head is in): the
        /// link is busy from then until its end.
        ///
        /// The window opens at the head, not at the first chunk: a first chunk's
        /// bytes crossed the link before it arrived. Opening at the first chunk
        /// counted those bytes with none of their time, and overstated the
        /// link most where transfers are small or start together (two 3 KB
        /// bodies that start at once read 1.47 times the link).
        func begin(at time: Duration) {
            state.withLock { state in
                if state.active == 0 { state.busySince = time }
                state.active += 1
            }
        }

        /// A chunk of body bytes arrived.
        func add(_ bytes: Int64) {
            state.withLock { state in
                state.bytes += bytes
                state.chunks += 1
            }
        }

        /// A transfer that had begun ended; with `minimumBytes`, also takes a sample.
        func end(at time: Duration, takingSampleOf minimumBytes: Int64? = nil) -> (bytes: Int64, busy: Duration)? {
            state.withLock { state in
                state.active -= 1
                if state.active == 0 { state.busy += time - state.busySince }
                guard let minimumBytes else { return nil }
                return Self.takeSample(at: time, minimumBytes: minimumBytes, in: &state)
            }
        }

        /// Bytes and busy time since the previous sample, if they make a measurement.
        func takeSample(at time: Duration, minimumBytes: Int64) -> (bytes: Int64, busy: Duration)? {
            state.withLock { Self.takeSample(at: time, minimumBytes: minimumBytes, in: &$0) }
        }

        private static func takeSample(at time: Duration, minimumBytes: Int64, in state: inout State) -> (bytes: Int64, busy: Duration)? {
            let busy = state.busy + (state.active > 0 ? time - state.busySince : .zero)
            let delta = (bytes: state.bytes - state.lastSample.bytes, busy: busy - state.lastSample.busy)
            guard delta.busy >= LinkMeter.minimumWindow, delta.bytes >= minimumBytes,
                  state.chunks - state.lastSample.chunks >= LinkMeter.minimumChunks else { return nil }
            state.lastSample = (busy, state.bytes, state.chunks)
            return delta
        }
    }

    private struct State {
        var received: Int64 = 0
        var began = false
        var ended = false
        /// Between two byte ranges: no body is on its way for this transfer.
        var paused = false
    }

    private let link: Counter
    private let now: @Sendable () -> Duration
    private let state = Mutex(State())

    init(controller link: Counter, now: @escaping @Sendable () -> Duration) {
        self.link = link
        self.now = now
    }

    /// The head arrived at `time`: the body may keep the link busy from now on.
    @Sendable func begin(at time: Duration) {
        let first = state.withLock { state -> Bool in
            defer { state.began = true }
            return !state.began && !state.ended
        }
        if first { link.begin(at: time) }
    }

    /// A byte range ended and the next is not asked for yet (see
    /// ``DelayablePacing``): the round trip until its head, and any wait for
    /// urgent work, do not keep the link busy. Counting them read a lone ranged
    /// download's link at about 75% of its speed, and shrank its ranges with it.
    @Sendable func pause() {
        let pauses = state.withLock { state -> Bool in
            guard state.began, !state.ended, !state.paused else { return false }
            state.paused = true
            return true
        }
        if pauses { _ = link.end(at: now()) }
    }

    /// The next byte range's head arrived: the link is busy again.
    @Sendable func resume() {
        let resumes = state.withLock { state -> Bool in
            guard state.paused, !state.ended else { return false }
            state.paused = false
            return true
        }
        if resumes { link.begin(at: now()) }
    }

    /// A chunk arrived; `received` is this transfer's running total.
    func record(_ received: Int64) {
        let delta = state.withLock { state -> Int64 in
            let delta = received - state.received
            state.received = received
            return delta
        }
        link.add(delta)
    }

    /// Marks the transfer ended; whether it was busy on the link (and so must end there).
    private func markEnded() -> Bool {
        state.withLock { state -> Bool in
            defer { state.ended = true }
            return state.began && !state.ended && !state.paused
        }
    }

    /// The transfer is over (whatever the outcome): its body no longer keeps the link busy.
    func finish() {
        if markEnded() { _ = link.end(at: now()) }
    }

    /// The sample to give the monitor. Whichever transfer ends, big or small, it
    /// closes a link sample when the link carried enough since the previous one
    /// (four times `minimumBytes`, over at least ``minimumWindow``); otherwise
    /// the sample carries no bytes and counts toward RTT only. Small transfers
    /// alone thus still measure the link: a controller that only fetches 3 KB
    /// feeds learns that the link got faster.
    func linkSample(for sample: TransferSample?, minimumBytes: Int64) -> TransferSample? {
        guard var sample else { return nil }
        let began = markEnded()
        let time = now()
        let window: (bytes: Int64, busy: Duration)?
        if began {
            window = link.end(at: time, takingSampleOf: 4 * minimumBytes)
        } else {
            window = link.takeSample(at: time, minimumBytes: 4 * minimumBytes)
        }
        if let window {
            sample.bytes = window.bytes
            sample.transferDuration = window.busy
        } else {
            sample.bytes = 0
        }
        return sample
    }
}
