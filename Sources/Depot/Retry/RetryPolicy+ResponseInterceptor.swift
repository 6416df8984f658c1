/// The retry policy as a ``ResponseInterceptor``: the controller asks it last,
/// after the authenticator and the configured interceptors.
extension RetryPolicy: ResponseInterceptor {
    /// Retries a failure that ``decision(for:headers:method:attempt:now:using:)``
    /// says to retry, after its delay; after the last attempt, says why in the
    /// error's detail. A response passes.
    public func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision {
        verdict(on: attempt, context: context)
    }

    /// The synchronous body of ``intercept(_:context:)``: the controller calls it
    /// directly, without an asynchronous call per failure.
    func verdict(on attempt: InterceptedAttempt, context: InterceptorContext) -> InterceptorDecision {
        guard case .failure(var failure) = attempt.outcome else { return .proceed }
        var random = context.random
        switch decision(for: failure, headers: attempt.responseHeaders, method: attempt.method, attempt: attempt.attempt, now: context.now, using: &random) {
        case .retry(let delay):
            return .retry(after: delay)
        case .doNotRetry(let reason):
            guard attempt.attempt > 1 else { return .proceed }
            failure.detail = failure.detail ?? "\(reason) after \(attempt.attempt) attempts"
            return .fail(failure)
        }
    }
}
