import Foundation

/// Streamed bodies: the controller is generic over `NetworkOperation`, and an
/// operation opts in by also being a ``StreamingNetworkOperation``, found with
/// a cast and opened here.
extension AttemptLoop {
    /// How the pipeline asks `operation` for a sink, or `nil` when it does not
    /// stream (then the context is never made).
    func bodySinkChooser<Operation: NetworkOperation>(for operation: Operation, context: @autoclosure () -> OperationContext) -> TransferPipeline.SinkChooser? {
        guard let streaming = operation as? any StreamingNetworkOperation else { return nil }
        let context = context()
        return { response in
            do {
                return try await Self.makeSink(streaming, for: response, context: context)
            } catch {
                // A sink that cannot be made is the operation's failure, not the
                // network's: it is not retried as a transfer failure would be.
                var failure = DepotError.wrap(error, operation: nil, fallback: .processing)
                if failure.status == nil { failure.status = response.status }
                throw failure
            }
        }
    }

    private static func makeSink<Streaming: StreamingNetworkOperation>(
        _ operation: Streaming,
        for response: NetworkResponse,
        context: OperationContext
    ) async throws -> (any ResponseBodySink)? {
        try await operation.makeBodySink(for: response, context: context)
    }

    /// `operation`'s ``StreamingNetworkOperation/process(_:streamedTo:context:)``
    /// for the body that went to `sink` (which that operation made).
    static func process<Operation: NetworkOperation>(
        _ operation: Operation,
        _ response: NetworkResponse,
        streamedTo sink: any ResponseBodySink,
        context: OperationContext
    ) async throws -> Operation.Output {
        // Unreachable failures: only a streaming operation makes a sink, of its own type.
        let mismatch = DepotError(.processing, operation: operation.name, detail: "a streamed body reached an operation that did not stream it")
        guard let streaming = operation as? any StreamingNetworkOperation else {
            await sink.fail(mismatch)
            throw mismatch
        }
        let output = try await processOpened(streaming, response, streamedTo: sink, context: context, mismatch: mismatch)
        guard let typed = output as? Operation.Output else { throw mismatch }
        return typed
    }

    private static func processOpened<Streaming: StreamingNetworkOperation>(
        _ operation: Streaming,
        _ response: NetworkResponse,
        streamedTo sink: any ResponseBodySink,
        context: OperationContext,
        mismatch: DepotError
    ) async throws -> any Sendable {
        guard let typed = sink as? Streaming.BodySink else {
            await sink.fail(mismatch)
            throw mismatch
        }
        return try await operation.process(response, streamedTo: typed, context: context)
    }
}
