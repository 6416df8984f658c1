import Foundation
import Logging

/// Sees what each attempt came to, a response or a failure, and decides what
/// happens next: pass it on, try again after a delay, or fail with another error.
///
/// Interceptors are where shared response logic lives, the way
/// ``RequestAdapter``s are where shared request logic lives: a token refresh
/// on 401, an API that answers 200 with an error document, a custom backoff.
///
/// For example, an API that reports errors in a 200's body:
///
/// ```swift
/// struct ErrorEnvelope: ResponseInterceptor {
///     func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision {
///         guard case .success(let response) = attempt.outcome,
///               response.body.starts(with: Data(#"{"error""#.utf8)) else { return .proceed }
///         return .fail(DepotError(.server, operation: attempt.operationName, status: response.status, detail: "error envelope"))
///     }
/// }
/// ```
///
/// **Order.** For every attempt the controller asks, in this order, and stops
/// at the first decision that is not ``InterceptorDecision/proceed``:
/// 1. the ``TokenAuthenticator``, if the configuration has one;
/// 2. ``NetworkController/Configuration/interceptors``, in the order given;
/// 3. the ``RetryPolicy``: the operation's, or else the configuration's.
///
/// When every interceptor proceeds, a response goes on to the operation's
/// `process` and a failure fails the operation. A retry waits for its delay in
/// the job (which keeps its slot), counts as an attempt, and is limited by the
/// controller's ``RetryBudget`` like every other retry.
///
/// Contract: `intercept` is called once per attempt, off the main actor, and
/// may suspend (the authenticator waits for a token refresh there). It must
/// not start work on the same controller and wait for it.
public protocol ResponseInterceptor: Sendable {
    /// Decides what happens after `attempt`.
    func intercept(_ attempt: InterceptedAttempt, context: InterceptorContext) async -> InterceptorDecision
}

/// One attempt as the interceptors see it: the request as sent, and what came back.
public struct InterceptedAttempt: Sendable {
    /// The request as it went out, after the adapters and the operation's `prepare`.
    public var request: TransportRequest
    /// The accepted response, or why the attempt failed (a refused status is a
    /// failure whose ``DepotError/status`` says which).
    public var outcome: Result<NetworkResponse, DepotError>
    /// The response's headers, also for a failure that had a response (for `Retry-After`).
    public var responseHeaders: HeaderFields
    /// Which attempt this is, from 1.
    public var attempt: Int
    /// The operation's name, for errors and logs.
    public var operationName: String
    /// Whether this attempt is the one retry that follows a token refresh.
    var followsRefresh = false

    /// The request's method.
    public var method: NetworkRequest.Method { request.method }

    /// Makes an attempt (for testing an interceptor on its own).
    public init(request: TransportRequest, outcome: Result<NetworkResponse, DepotError>, responseHeaders: HeaderFields = [:], attempt: Int = 1, operationName: String = "request") {
        self.request = request
        self.outcome = outcome
        self.responseHeaders = responseHeaders
        self.attempt = attempt
        self.operationName = operationName
    }
}

/// What an interceptor decided. A struct with static members, so that new
/// decisions can come without breaking a `switch`.
public struct InterceptorDecision: Sendable {
    enum Base: Sendable {
        case proceed
        case retry(after: Duration)
        case fail(DepotError)
        /// The authenticator's one retry with a new token: not counted against the budget.
        case retryAuthenticated
    }

    let base: Base

    /// No opinion: the next interceptor decides, and after the last one the
    /// response is processed or the failure stands.
    public static let proceed = InterceptorDecision(base: .proceed)

    /// Try again after `delay` (negative delays count as zero).
    public static func retry(after delay: Duration) -> InterceptorDecision {
        InterceptorDecision(base: .retry(after: max(.zero, delay)))
    }

    /// Fail the operation with `error`, also when the attempt succeeded.
    public static func fail(_ error: DepotError) -> InterceptorDecision {
        InterceptorDecision(base: .fail(error))
    }

    /// Whether this passes the attempt on.
    public var isProceed: Bool {
        if case .proceed = base { return true }
        return false
    }

    /// The delay of a retry, or `nil` when this is not one.
    public var retryDelay: Duration? {
        switch base {
        case .retry(let delay): return delay
        case .retryAuthenticated: return .zero
        case .proceed, .fail: return nil
        }
    }

    /// The error of a failure decision, or `nil`.
    public var failure: DepotError? {
        if case .fail(let error) = base { return error }
        return nil
    }
}

/// What the controller lends an interceptor: the wall clock, random numbers
/// for jitter, the logger.
public struct InterceptorContext: Sendable {
    /// The controller's wall clock now (``DepotEnvironment/date``).
    public var now: Date
    /// The controller's logger.
    public var logger: Logger
    let randomSource: @Sendable () -> UInt64
    /// Sends a request straight through the controller's transport (see ``TokenRefreshContext``).
    let send: @Sendable (TransportRequest) async throws(DepotError) -> NetworkResponse

    /// Makes a context (for testing an interceptor on its own): system random
    /// numbers, and a `send` that fails with `.invalidRequest`.
    public init(now: Date = Date(), logger: Logger = Logger(label: "depot")) {
        self.init(now: now, logger: logger, random: { UInt64.random(in: .min ... .max) }, send: { request throws(DepotError) in
            throw DepotError(.invalidRequest, detail: "this context sends nothing (\(Redaction.default.url(request.url)))")
        })
    }

    init(now: Date, logger: Logger, random: @escaping @Sendable () -> UInt64, send: @escaping @Sendable (TransportRequest) async throws(DepotError) -> NetworkResponse) {
        self.now = now
        self.logger = logger
        self.randomSource = random
        self.send = send
    }

    /// Random numbers for jitter: the controller's, seeded when
    /// ``DepotEnvironment/seed`` is set, so that tests repeat.
    public var random: RandomNumbers { RandomNumbers(next: randomSource) }

    /// A generator backed by the controller's random numbers.
    public struct RandomNumbers: RandomNumberGenerator, Sendable {
        let nextValue: @Sendable () -> UInt64

        init(next: @escaping @Sendable () -> UInt64) {
            nextValue = next
        }

        public mutating func next() -> UInt64 { nextValue() }
    }
}
