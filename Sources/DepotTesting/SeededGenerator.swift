/// A small, fast random number generator (SplitMix64) that gives the same
/// numbers for the same seed, so jittered backoff is repeatable in tests.
///
/// For example:
///
/// ```swift
/// var random = SeededGenerator(seed: 42)
/// let delay = RetryPolicy.default.backoff(after: 2, using: &random)   // the same every run
/// ```
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Makes a generator; equal seeds give equal sequences.
    ///
    /// - Parameter seed: Any number.
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
