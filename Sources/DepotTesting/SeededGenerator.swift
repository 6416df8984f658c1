import Seeded

/// A small, fast random number generator (SplitMix64) that gives the same
/// numbers for the same seed, so jittered backoff is repeatable in tests.
///
/// For example:
///
/// ```swift
/// var random = SeededGenerator(seed: 42)
/// let decision = RetryPolicy.default.decision(forStatus: 503, headers: [:], method: .get, attempt: 2, now: Date(), using: &random)
/// print(decision.delay ?? .zero)   // the same every run
/// ```
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var base: SplitMix64

    /// Makes a generator; equal seeds give equal sequences.
    ///
    /// - Parameter seed: Any number.
    public init(seed: UInt64) { base = SplitMix64(seed: seed) }

    public mutating func next() -> UInt64 { base.next() }
}
