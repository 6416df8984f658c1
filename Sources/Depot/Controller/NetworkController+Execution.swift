import Foundation
import Logging

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

        // 1. Build and adapt the request.
        var transportRequest = TransportRequest(url: url, method: request.method, headers: request.headers, timeout: operation.timeout.idle)
        if let body = request.body {
            do {
                transportRequest.body = try body.encode()
            } catch {
                return JobResult(result: .failure(DepotError.wrap(error, operation: name, fallback: .encoding)))
            }
            if let contentType = body.contentType, !transportRequest.headers.contains("Content-Type") {
                transportRequest.headers["Content-Type"] = contentType
            }
        }
        let context = OperationContext(ticket: environment.job, attempt: 1, logger: logger, values: configuration.contextValues, operationName: name)
        do {
            for adapter in configuration.adapters {
                try await adapter.adapt(&transportRequest)
            }
            try await operation.prepare(&transportRequest, context: context)
        } catch {
            return JobResult(result: .failure(DepotError.wrap(error, operation: name, fallback: .invalidRequest)))
        }
        logger.debug("started", metadata: logMetadata().merging(["http.method": "\(transportRequest.method)", "http.url": "\(transportRequest.url.absoluteString)"]) { $1 })
        logger.trace("request headers", metadata: logMetadata().merging(["http.headers": "\(transportRequest.headers)"]) { $1 })

        // 2. Transfer.
        let transfer: TransferPipeline.Result
        do {
            transfer = try await pipeline.run(transportRequest, timeout: operation.timeout, cancelOnTimeout: environment.cancel, onProgress: environment.onProgress)
        } catch {
            return JobResult(result: .failure(DepotError.wrap(error, operation: name, fallback: .transport)))
        }
        let response = transfer.response
        logger.trace("response headers", metadata: logMetadata().merging(["http.status": "\(response.status)", "http.headers": "\(response.headers)"]) { $1 })

        // 3. Validate.
        do {
            try operation.validate(response)
        } catch {
            var failure = DepotError.wrap(error, operation: name, fallback: .unexpectedStatus)
            if failure.status == nil { failure.status = response.status }
            return JobResult(result: .failure(failure), status: response.status, sample: transfer.sample)
        }

        // 4. Process.
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
