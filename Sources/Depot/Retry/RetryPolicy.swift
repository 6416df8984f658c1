import Foundation

/// Decides whether a failed request is tried again, and after how long.
///
/// By default a request is retried at most twice (three attempts), only when
/// its method is idempotent, and only for failures that a later attempt can fix:
/// a lost connection (also a body cut short), or the statuses 408, 429, 502,
/// 503 and 504. A timeout is not retried: it ends the job.
/// `.offline` is not retried here: the controller holds work while offline and
/// resumes it on reconnect, which is a better wait than any backoff.
///
/// The delay is exponential backoff with full jitter (a uniformly random delay
/// between zero and `min(maximumDelay, baseDelay × 2^(attempt-1))`), unless the
/// server sent `Retry-After`, which wins, clamped to ``maximumRetryAfter``.
///
/// For example:
///
/// ```swift
/// var random = SystemRandomNumberGenerator()
/// switch RetryPolicy.default.decision(for: error, method: .get, attempt: 1, now: wallClock, using: &random) {
/// case .retry(let delay): try await clock.sleep(for: delay)
/// case .doNotRetry(let reason): throw error   // reason says why
/// }
/// ```
public struct RetryPolicy: Sendable, Hashable {
    /// The most attempts, the first one included; 1 never retries. Values
    /// below 1 are taken as 1, here as in ``init(maximumAttempts:baseDelay:maximumDelay:maximumRetryAfter:methods:statuses:codes:)``.
    public var maximumAttempts: Int { didSet { maximumAttempts = max(1, maximumAttempts) } }
    /// The backoff ceiling of the first retry (negative values are taken as zero).
    public var baseDelay: Duration { didSet { baseDelay = max(.zero, baseDelay) } }
    /// The backoff ceiling never grows past this (negative values are taken as zero).
    public var maximumDelay: Duration { didSet { maximumDelay = max(.zero, maximumDelay) } }
    /// A longer `Retry-After` is shortened to this (negative values are taken as zero).
    public var maximumRetryAfter: Duration { didSet { maximumRetryAfter = max(.zero, maximumRetryAfter) } }
    /// Methods that may be retried.
    public var methods: Set<NetworkRequest.Method>
    /// Statuses that may be retried.
    public var statuses: Set<Int>
    /// Error codes (of failures without a status) that may be retried.
    public var codes: Set<DepotError.Code>

    /// Makes a policy; every parameter has a default.
    ///
    /// - Parameters:
    ///   - maximumAttempts: The most attempts, the first included (3).
    ///   - baseDelay: The first retry's backoff ceiling (0.5 s).
    ///   - maximumDelay: The largest backoff ceiling (30 s).
    ///   - maximumRetryAfter: The longest `Retry-After` honoured as is (60 s).
    ///   - methods: Retried methods (the idempotent ones: GET, HEAD, PUT, DELETE, OPTIONS).
    ///   - statuses: Retried statuses (408, 429, 502, 503, 504).
    ///   - codes: Retried error codes (`.connectionLost`). A timeout ends the job
    ///     in the controller (the watch cancels its task), so adding `.timedOut`
    ///     here has no effect there.
    public init(
        maximumAttempts: Int = 3,
        baseDelay: Duration = .milliseconds(500),
        maximumDelay: Duration = .seconds(30),
        maximumRetryAfter: Duration = .seconds(60),
        methods: Set<NetworkRequest.Method> = [.get, .head, .put, .delete, .options],
        statuses: Set<Int> = [408, 429, 502, 503, 504],
        codes: Set<DepotError.Code> = [.connectionLost]
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.baseDelay = max(.zero, baseDelay)
        self.maximumDelay = max(.zero, maximumDelay)
        self.maximumRetryAfter = max(.zero, maximumRetryAfter)
        self.methods = methods
        self.statuses = statuses
        self.codes = codes
    }

    /// Three attempts, 0.5 s base, 30 s cap, `Retry-After` up to 60 s, idempotent methods only.
    public static let `default` = RetryPolicy()

    /// Never retries.
    public static let never = RetryPolicy(maximumAttempts: 1)

    /// The largest backoff before the retry that follows attempt `attempt`:
    /// `min(maximumDelay, baseDelay × 2^(attempt-1))`.
    ///
    /// - Parameter attempt: The attempt that just failed, from 1.
    package func backoffCeiling(after attempt: Int) -> Duration {
        let doublings = min(max(attempt - 1, 0), 62)
        let ceiling = baseDelay.seconds * pow(2, Double(doublings))
        return min(maximumDelay, .seconds(min(ceiling, maximumDelay.seconds)))
    }

    /// A backoff with full jitter: uniformly random in `0 ... backoffCeiling(after: attempt)`.
    ///
    /// For example:
    ///
    /// ```swift
    /// var random = SystemRandomNumberGenerator()
    /// RetryPolicy.default.backoff(after: 2, using: &random)   // somewhere in 0 ... 1 s
    /// ```
    ///
    /// - Parameters:
    ///   - attempt: The attempt that just failed, from 1.
    ///   - generator: The source of randomness; pass a seeded one in tests.
    package func backoff(after attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let ceiling = backoffCeiling(after: attempt)
        let nanoseconds = ceiling.components.seconds * 1_000_000_000 + ceiling.components.attoseconds / 1_000_000_000
        guard nanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...nanoseconds, using: &generator))
    }

    /// Whether and when to retry after a failure.
    ///
    /// A failure with an HTTP status is judged by its status (and `headers`, for
    /// `Retry-After`); any other failure by its code.
    ///
    /// - Parameters:
    ///   - error: The failure of attempt `attempt`.
    ///   - headers: The response headers, when a response arrived.
    ///   - method: The request's method.
    ///   - attempt: The attempt that just failed, from 1.
    ///   - now: The wall-clock time, for a `Retry-After` given as an HTTP date.
    ///   - generator: The source of jitter.
    public func decision(
        for error: DepotError,
        headers: HeaderFields = [:],
        method: NetworkRequest.Method,
        attempt: Int,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> RetryDecision {
        // A status decides only for an answer refused for its status. A transfer
        // that failed after the head arrived (a 200 cut short, a 503 too large to
        // read) carries the status too, but its code says what went wrong.
        if let status = error.status, !Self.transferCodes.contains(error.code) {
            return decision(forStatus: status, headers: headers, method: method, attempt: attempt, now: now, using: &generator)
        }
        if let refusal = refusal(method: method, attempt: attempt) { return .doNotRetry(refusal) }
        guard codes.contains(error.code) else { return .doNotRetry(.notRetryable) }
        return .retry(after: backoff(after: attempt, using: &generator))
    }

    /// Whether and when to retry after a response with status `status`.
    ///
    /// - Parameters:
    ///   - status: The response's status.
    ///   - headers: The response's headers; `Retry-After` is honoured.
    ///   - method: The request's method.
    ///   - attempt: The attempt that just failed, from 1.
    ///   - now: The wall-clock time, for a `Retry-After` given as an HTTP date.
    ///   - generator: The source of jitter.
    public func decision(
        forStatus status: Int,
        headers: HeaderFields,
        method: NetworkRequest.Method,
        attempt: Int,
        now: Date,
        using generator: inout some RandomNumberGenerator
    ) -> RetryDecision {
        if let refusal = refusal(method: method, attempt: attempt) { return .doNotRetry(refusal) }
        guard statuses.contains(status) else { return .doNotRetry(.notRetryable) }
        if let value = headers["Retry-After"], let delay = RetryAfter.delay(value, now: now) {
            return .retry(after: min(delay, maximumRetryAfter))
        }
        return .retry(after: backoff(after: attempt, using: &generator))
    }

    /// ``decision(for:headers:method:attempt:now:using:)`` with the system's random numbers.
    public func decision(for error: DepotError, headers: HeaderFields = [:], method: NetworkRequest.Method, attempt: Int, now: Date) -> RetryDecision {
        var generator = SystemRandomNumberGenerator()
        return decision(for: error, headers: headers, method: method, attempt: attempt, now: now, using: &generator)
    }

    /// Failures of the transfer itself, judged by their code even when a status came first.
    private static let transferCodes: Set<DepotError.Code> = [.connectionLost, .timedOut, .tooLarge, .offline, .transport, .cancelled, .tooManyRedirects, .insecureRedirect]

    private func refusal(method: NetworkRequest.Method, attempt: Int) -> RetryDecision.Reason? {
        if !methods.contains(method) { return .methodNotRetryable }
        if attempt >= maximumAttempts { return .attemptsExhausted }
        return nil
    }
}

/// What a ``RetryPolicy`` (and a ``RetryBudget``) decided about a failure.
///
/// Frozen on purpose: a failure is retried or it is not, so a `switch` over
/// these two cases stays exhaustive. New reasons not to retry are added to
/// ``Reason``, a struct with static members.
public enum RetryDecision: Sendable, Hashable {
    /// Send the request again after this delay.
    case retry(after: Duration)
    /// Give up and report the failure.
    case doNotRetry(Reason)

    /// Why a failure is not retried.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        let name: String

        /// The method is not in the policy's methods (by default: not idempotent).
        public static let methodNotRetryable = Reason(name: "method not retryable")
        /// The policy's attempts are used up.
        public static let attemptsExhausted = Reason(name: "attempts exhausted")
        /// The status or error code is not one the policy retries.
        public static let notRetryable = Reason(name: "failure not retryable")
        /// The ``RetryBudget`` is spent: too many retries for too few successes.
        public static let budgetExhausted = Reason(name: "retry budget exhausted")

        public var description: String { name }
    }

    /// The delay, when the decision is to retry.
    public var delay: Duration? {
        if case .retry(let delay) = self { return delay }
        return nil
    }
}
