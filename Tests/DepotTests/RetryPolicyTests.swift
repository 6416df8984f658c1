import Depot
import DepotTesting
import Foundation
import Testing

@Suite struct RetryPolicyTests {
    /// 2024-05-01 12:00:00 UTC.
    let now = Date(timeIntervalSince1970: 1_714_564_800)

    @Test func jitterStaysWithinTheCeilingOver1000Draws() {
        var random = SeededGenerator(seed: 7)
        let policy = RetryPolicy.default
        for attempt in 1...8 {
            let ceiling = policy.backoffCeiling(after: attempt)
            var smallest = Duration.seconds(1_000), largest = Duration.zero
            for _ in 0..<1_000 {
                let delay = policy.backoff(after: attempt, using: &random)
                #expect(delay >= .zero && delay <= ceiling)
                smallest = min(smallest, delay)
                largest = max(largest, delay)
            }
            // Full jitter: the draws cover the range, from near 0 to near the ceiling.
            #expect(smallest < ceiling * 0.05)
            #expect(largest > ceiling * 0.95)
        }
    }

    @Test func ceilingDoublesUpToTheCap() {
        let policy = RetryPolicy.default
        #expect(policy.backoffCeiling(after: 1) == .milliseconds(500))
        #expect(policy.backoffCeiling(after: 2) == .seconds(1))
        #expect(policy.backoffCeiling(after: 4) == .seconds(4))
        #expect(policy.backoffCeiling(after: 7) == .seconds(30))
        #expect(policy.backoffCeiling(after: 500) == .seconds(30))
    }

    @Test func sameSeedSameDelays() {
        var a = SeededGenerator(seed: 42), b = SeededGenerator(seed: 42)
        let first = (1...5).map { RetryPolicy.default.backoff(after: $0, using: &a) }
        let second = (1...5).map { RetryPolicy.default.backoff(after: $0, using: &b) }
        #expect(first == second)
    }

    @Test func retriesLostConnectionsOfIdempotentMethods() {
        var random = SeededGenerator(seed: 1)
        let policy = RetryPolicy.default
        #expect(policy.decision(for: DepotError(.connectionLost), method: .get, attempt: 1, now: now, using: &random).delay != nil)
        #expect(policy.decision(for: DepotError(.connectionLost), method: .put, attempt: 2, now: now, using: &random).delay != nil)
        #expect(policy.decision(for: DepotError(.timedOut), method: .get, attempt: 1, now: now, using: &random) == .doNotRetry(.notRetryable))
        #expect(policy.decision(for: DepotError(.offline), method: .get, attempt: 1, now: now, using: &random) == .doNotRetry(.notRetryable))
        #expect(policy.decision(for: DepotError(.decoding), method: .get, attempt: 1, now: now, using: &random) == .doNotRetry(.notRetryable))
        #expect(policy.decision(for: DepotError(.connectionLost), method: .post, attempt: 1, now: now, using: &random) == .doNotRetry(.methodNotRetryable))
        #expect(policy.decision(for: DepotError(.connectionLost), method: .patch, attempt: 1, now: now, using: &random) == .doNotRetry(.methodNotRetryable))
        #expect(policy.decision(for: DepotError(.connectionLost), method: .get, attempt: 3, now: now, using: &random) == .doNotRetry(.attemptsExhausted))
    }

    @Test func retriesOnlyTheTransientStatuses() {
        var random = SeededGenerator(seed: 1)
        let policy = RetryPolicy.default
        for status in [408, 429, 502, 503, 504] {
            #expect(policy.decision(forStatus: status, headers: [:], method: .get, attempt: 1, now: now, using: &random).delay != nil)
        }
        for status in [400, 401, 404, 500, 501] {
            #expect(policy.decision(forStatus: status, headers: [:], method: .get, attempt: 1, now: now, using: &random) == .doNotRetry(.notRetryable))
        }
        // An error that carries a status is judged by it.
        #expect(policy.decision(for: DepotError.forStatus(503), method: .get, attempt: 1, now: now, using: &random).delay != nil)
        #expect(policy.decision(for: DepotError.forStatus(500), method: .get, attempt: 1, now: now, using: &random) == .doNotRetry(.notRetryable))
        // A transfer that failed after the head came is judged by what went wrong, not by the status.
        #expect(policy.decision(for: DepotError(.connectionLost, status: 200, detail: "body truncated"), method: .get, attempt: 1, now: now, using: &random).delay != nil)
        #expect(policy.decision(for: DepotError(.tooLarge, status: 503), method: .get, attempt: 1, now: now, using: &random) == .doNotRetry(.notRetryable))
    }

    @Test func retryAfterSecondsWins() {
        var random = SeededGenerator(seed: 1)
        let decision = RetryPolicy.default.decision(forStatus: 503, headers: ["Retry-After": "7"], method: .get, attempt: 1, now: now, using: &random)
        #expect(decision == .retry(after: .seconds(7)))
    }

    @Test func retryAfterHTTPDateIsRelativeToNow() {
        var random = SeededGenerator(seed: 1)
        let decision = RetryPolicy.default.decision(forStatus: 429, headers: ["Retry-After": "Wed, 01 May 2024 12:00:42 GMT"], method: .get, attempt: 1, now: now, using: &random)
        #expect(decision == .retry(after: .seconds(42)))
    }

    @Test func retryAfterIsClamped() {
        var random = SeededGenerator(seed: 1)
        let policy = RetryPolicy(maximumRetryAfter: .seconds(30))
        #expect(policy.decision(forStatus: 503, headers: ["Retry-After": "3600"], method: .get, attempt: 1, now: now, using: &random) == .retry(after: .seconds(30)))
        // A date in the past means now.
        #expect(policy.decision(forStatus: 503, headers: ["Retry-After": "Wed, 01 May 2024 11:00:00 GMT"], method: .get, attempt: 1, now: now, using: &random) == .retry(after: .zero))
    }

    @Test func unreadableRetryAfterFallsBackToBackoff() {
        var random = SeededGenerator(seed: 1)
        let delay = RetryPolicy.default.decision(forStatus: 503, headers: ["Retry-After": "soon"], method: .get, attempt: 1, now: now, using: &random).delay
        #expect(delay.map { $0 <= .milliseconds(500) } == true)
    }

    @Test func neverRetries() {
        var random = SeededGenerator(seed: 1)
        #expect(RetryPolicy.never.decision(for: DepotError(.connectionLost), method: .get, attempt: 1, now: now, using: &random) == .doNotRetry(.attemptsExhausted))
    }

    /// A setter cannot make what `init` refuses: the same clamps apply.
    @Test func settersKeepTheInvariantsOfInit() {
        var policy = RetryPolicy.default
        policy.maximumAttempts = 0
        #expect(policy.maximumAttempts == 1)
        policy.maximumAttempts = -5
        #expect(policy.maximumAttempts == 1)
        policy.baseDelay = .seconds(-1)
        policy.maximumDelay = .seconds(-1)
        policy.maximumRetryAfter = .seconds(-1)
        #expect(policy.baseDelay == .zero && policy.maximumDelay == .zero && policy.maximumRetryAfter == .zero)
        #expect(policy == RetryPolicy(maximumAttempts: 0, baseDelay: .seconds(-1), maximumDelay: .seconds(-1), maximumRetryAfter: .seconds(-1)))
    }
}
