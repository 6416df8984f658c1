import Foundation
import Logging
import Synchronization

extension NetworkController {
    /// Runs one job: build the request, adapt it, transfer, validate, process.
    func execute<Operation: NetworkOperation>(
        _ operation: Operation,
        name: String,
        request: Request,
        url: URL,
        environment: JobEnvironment
    ) async -> JobResult {
        let logger = configuration.logger
        let logMetadata: () -> Logger.Metadata = { ["depot.ticket": "\(environment.job)", "depot.operation": "\(name)"] }

        var attempt = 1
        while true {
            let outcome = await attemptTransfer(operation, name: name, request: request, url: url, attempt: attempt, environment: environment, logger: logger, logMetadata: logMetadata)
            switch outcome {
            case .response(let response, let sample):
                noteSuccess()
                // 4. Process.
                return await process(operation, name: name, response: response, sample: sample, attempt: attempt, environment: environment, logger: logger)
            case .failed(var failure, let headers, let sample):
                if failure.code == .offline, operation.offlineBehavior == .waitForConnectivity, !Task.isCancelled {
                    return JobResult(result: .failure(failure), waitsForNetwork: true)
                }
                guard !Task.isCancelled, failure.code != .cancelled else {
                    return JobResult(result: .failure(failure), status: failure.status, sample: sample)
                }
                let decision = retryDecision(for: failure, headers: headers, operation: operation, method: request.method, attempt: attempt)
                guard case .retry(let delay) = decision else {
                    if case .doNotRetry(let reason) = decision, attempt > 1 || reason == .budgetExhausted {
                        failure.detail = failure.detail ?? "\(reason) after \(attempt) attempt\(attempt == 1 ? "" : "s")"
                    }
                    return JobResult(result: .failure(failure), status: failure.status, sample: sample)
                }
                beginBackoff(job: environment.job, attempt: attempt, delay: delay, error: failure)
                let slept: Bool
                do {
                    try await timebase.sleep(for: delay)
                    slept = true
                } catch {
                    slept = false
                }
                attempt += 1
                endBackoff(job: environment.job, nextAttempt: attempt)
                guard slept else { return JobResult(result: .failure(DepotError(.cancelled, operation: name)), status: failure.status) }
            }
        }
    }

    enum AttemptOutcome {
        case response(Response, TransferSample?)
        case failed(DepotError, headers: HTTPHeaders, sample: TransferSample?)
    }

    /// One attempt: build and adapt the request, transfer, validate.
    private func attemptTransfer<Operation: NetworkOperation>(
        _ operation: Operation,
        name: String,
        request: Request,
        url: URL,
        attempt: Int,
        environment: JobEnvironment,
        logger: Logger,
        logMetadata: () -> Logger.Metadata
    ) async -> AttemptOutcome {
        // 1. Build and adapt the request.
        var transportRequest = TransportRequest(url: url, method: request.method, headers: request.headers, timeout: operation.timeout.idle)
        if let body = request.body {
            do {
                transportRequest.body = try body.encode()
            } catch {
                return .failed(DepotError.wrap(error, operation: name, fallback: .encoding), headers: [:], sample: nil)
            }
            if let contentType = body.contentType, !transportRequest.headers.contains("Content-Type") {
                transportRequest.headers["Content-Type"] = contentType
            }
        }
        let context = OperationContext(ticket: environment.job, attempt: attempt, logger: logger, values: configuration.contextValues, operationName: name)
        do {
            for adapter in configuration.adapters {
                try await adapter.adapt(&transportRequest)
            }
            try await operation.prepare(&transportRequest, context: context)
        } catch {
            return .failed(DepotError.wrap(error, operation: name, fallback: .invalidRequest), headers: [:], sample: nil)
        }
        logger.debug("started", metadata: logMetadata().merging(["http.method": "\(transportRequest.method)", "http.url": "\(transportRequest.url.absoluteString)"]) { $1 })
        logger.trace("request headers", metadata: logMetadata().merging(["http.headers": "\(transportRequest.headers)"]) { $1 })

        // 2. Transfer, counting the link's bytes while this body arrives.
        let meter = LinkMeter(controller: linkBytes, now: timebase.now)
        let onProgress = environment.onProgress
        let transfer: TransferPipeline.Result
        do {
            transfer = try await pipeline.run(transportRequest, timeout: operation.timeout, cancelOnTimeout: environment.cancel) { progress in
                meter.record(progress.received)
                onProgress(progress)
            }
        } catch {
            let failure = DepotError.wrap(error, operation: name, fallback: .transport)
            noteAttempt(sample: nil, error: failure)
            return .failed(failure, headers: [:], sample: nil)
        }
        let response = transfer.response
        noteAttempt(sample: meter.linkSample(for: transfer.sample, minimumBytes: configuration.monitor.minimumMeasurableBytes), error: nil)
        if let trace = configuration.trace {
            let sample = transfer.sample
            let firstByte = timebase.now() - sample.transferDuration
            for waiter in waiters(of: environment.job) { trace.firstByte(waiter, at: firstByte) }
        }
        logger.trace("response headers", metadata: logMetadata().merging(["http.status": "\(response.status)", "http.headers": "\(response.headers)"]) { $1 })

        // 3. Validate.
        do {
            try operation.validate(response)
        } catch {
            var failure = DepotError.wrap(error, operation: name, fallback: .unexpectedStatus)
            if failure.status == nil { failure.status = response.status }
            return .failed(failure, headers: response.headers, sample: transfer.sample)
        }
        return .response(response, transfer.sample)
    }

    /// Turns an accepted response into the job's result.
    private func process<Operation: NetworkOperation>(
        _ operation: Operation,
        name: String,
        response: Response,
        sample: TransferSample?,
        attempt: Int,
        environment: JobEnvironment,
        logger: Logger
    ) async -> JobResult {
        let transfer = (response: response, sample: sample)
        let context = OperationContext(ticket: environment.job, attempt: attempt, logger: logger, values: configuration.contextValues, operationName: name)
        do {
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

/// Counts the body bytes of every transfer on the link, so a transfer's sample
/// can report what the LINK carried while it ran: with four transfers sharing a
/// 2 Mbit/s link each one sees 500 kbit/s, but the link is still a 2 Mbit/s link.
final class LinkMeter: Sendable {
    private struct State {
        var received: Int64 = 0
        var firstByte: (time: Duration, link: Int64)?
    }

    /// The controller's running total of body bytes, and where the last link
    /// sample ended.
    final class Counter: Sendable {
        let bytes = Atomic<Int64>(0)
        let lastSample = Mutex<(time: Duration, link: Int64)?>(nil)
    }

    private let link: Counter
    private let now: @Sendable () -> Duration
    private let state = Mutex(State())

    init(controller link: Counter, now: @escaping @Sendable () -> Duration) {
        self.link = link
        self.now = now
    }

    /// A chunk arrived; `received` is this transfer's running total.
    func record(_ received: Int64) {
        let delta = state.withLock { state -> Int64 in
            let delta = received - state.received
            state.received = received
            return delta
        }
        let total = link.bytes.wrappingAdd(delta, ordering: .relaxed).newValue
        state.withLock { state in
            if state.firstByte == nil { state.firstByte = (now(), total - delta) }
        }
    }

    /// The sample to give the monitor. For a transfer big enough to measure:
    /// the link's bytes per second since this transfer's first byte or since the
    /// last such sample, whichever is later, so each sample describes the link
    /// as it is now (a transfer that began before a drop would otherwise average
    /// the fast past in). Smaller transfers give their own sample, which counts
    /// toward RTT only.
    func linkSample(for sample: TransferSample?, minimumBytes: Int64) -> TransferSample? {
        guard var sample else { return nil }
        guard sample.bytes >= minimumBytes, let first = state.withLock({ $0.firstByte }) else { return sample }
        let end = (time: now(), link: link.bytes.load(ordering: .relaxed))
        let start = link.lastSample.withLock { last -> (time: Duration, link: Int64) in
            defer { last = end }
            guard let previous = last, previous.time > first.time else { return first }
            return previous
        }
        guard end.time > start.time, end.link > start.link else { return sample }
        sample.bytes = end.link - start.link
        sample.transferDuration = end.time - start.time
        return sample
    }
}
