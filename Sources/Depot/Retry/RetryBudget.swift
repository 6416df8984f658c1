/// Limits retries to a share of successes, so that a struggling server is not
/// buried under retries (the token bucket of gRPC's retry throttling and
/// Finagle's `RetryBudget`).
///
/// Every success deposits ``depositPerSuccess`` tokens, up to ``capacity``;
/// every retry withdraws one. With the defaults, after the first ten retries
/// there can be at most one retry for every ten successes. A reserve of
/// ``minimumRetriesPerSecond`` refills with time, so a quiet client can still
/// retry a little. Time is passed in, as elapsed time since some origin.
///
/// For example:
///
/// ```swift
/// var configuration = NetworkController.Configuration(baseURL: api)
/// configuration.retries.budget = RetryBudget(capacity: 20, depositPerSuccess: 0.2)
/// ```
public struct RetryBudget: Sendable, Hashable {
    /// The most tokens the bucket holds (negative values are taken as zero, as in `init`).
    public var capacity: Double { didSet { capacity = max(0, capacity) } }
    /// Tokens each success deposits (negative values are taken as zero).
    public var depositPerSuccess: Double { didSet { depositPerSuccess = max(0, depositPerSuccess) } }
    /// Retries per second always allowed, whatever the successes (0 for none; negative values are taken as zero).
    public var minimumRetriesPerSecond: Double { didSet { minimumRetriesPerSecond = max(0, minimumRetriesPerSecond) } }

    var tokens: Double
    var reserve: Double
    var lastRefill: Duration?

    /// Makes a budget that starts full.
    ///
    /// - Parameters:
    ///   - capacity: The most tokens held, and the starting amount (10).
    ///   - depositPerSuccess: Tokens per success (0.1: one retry per ten successes).
    ///   - minimumRetriesPerSecond: A reserve that refills with time (0).
    public init(capacity: Double = 10, depositPerSuccess: Double = 0.1, minimumRetriesPerSecond: Double = 0) {
        self.capacity = max(0, capacity)
        self.depositPerSuccess = max(0, depositPerSuccess)
        self.minimumRetriesPerSecond = max(0, minimumRetriesPerSecond)
        self.tokens = self.capacity
        self.reserve = self.minimumRetriesPerSecond
    }

    /// Ten tokens, a tenth of a token per success, no time-based reserve.
    public static let `default` = RetryBudget()

    /// A budget that never runs out.
    public static let unlimited = RetryBudget(capacity: .infinity, depositPerSuccess: 0)

    /// The retries available now (rounded down).
    ///
    /// - Parameter time: Now, as elapsed time since the origin.
    package func available(at time: Duration) -> Int {
        var copy = self
        copy.refill(at: time)
        let total = copy.tokens + copy.reserve
        return total.isInfinite ? Int.max : Int((total + 1e-9).rounded(.down))
    }

    /// A request succeeded: deposit tokens.
    ///
    /// - Parameter time: When, as elapsed time since the origin.
    package mutating func recordSuccess(at time: Duration) {
        refill(at: time)
        tokens = min(capacity, tokens + depositPerSuccess)
    }

    /// Takes one retry from the budget, if there is one. Returns whether the retry may go ahead.
    ///
    /// - Parameter time: When, as elapsed time since the origin.
    package mutating func withdraw(at time: Duration) -> Bool {
        refill(at: time)
        if reserve >= 1 - 1e-9 {
            reserve -= 1
            return true
        }
        if tokens >= 1 - 1e-9 {
            tokens -= 1
            return true
        }
        return false
    }

    /// Passes a policy's decision through the budget: a retry withdraws a token,
    /// or becomes `.doNotRetry(.budgetExhausted)` when none is left.
    ///
    /// - Parameters:
    ///   - decision: What the ``RetryPolicy`` decided.
    ///   - time: Now, as elapsed time since the origin.
    package mutating func gate(_ decision: RetryDecision, at time: Duration) -> RetryDecision {
        guard case .retry = decision else { return decision }
        return withdraw(at: time) ? decision : .doNotRetry(.budgetExhausted)
    }

    private mutating func refill(at time: Duration) {
        defer { lastRefill = max(lastRefill ?? time, time) }
        guard minimumRetriesPerSecond > 0, let lastRefill, time > lastRefill else { return }
        reserve = min(minimumRetriesPerSecond, reserve + (time - lastRefill).seconds * minimumRetriesPerSecond)
    }
}
