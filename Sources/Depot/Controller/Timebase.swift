/// The injected clock, reduced to what the controller needs: elapsed time since
/// the controller was made, and sleeping until a point on that scale.
struct Timebase: Sendable {
    let now: @Sendable () -> Duration
    let sleepUntil: @Sendable (Duration) async throws -> Void

    init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let origin = clock.now
        if C.self == ContinuousClock.self, let origin = origin as? ContinuousClock.Instant {
            // The default clock, read about ten times per operation: read it
            // directly, not through the generic `Clock` witnesses. (The clock's
            // type, not its instant's: another clock may use the same instant.)
            now = { origin.duration(to: .now) }
        } else {
            now = { origin.duration(to: clock.now) }
        }
        sleepUntil = { offset in
            let deadline = origin.advanced(by: offset)
            // A deadline already reached returns at once, whatever the clock does with it.
            guard clock.now < deadline else { return try Task.checkCancellation() }
            try await clock.sleep(until: deadline, tolerance: nil)
        }
    }

    func sleep(for duration: Duration) async throws {
        try await sleepUntil(now() + duration)
    }
}
