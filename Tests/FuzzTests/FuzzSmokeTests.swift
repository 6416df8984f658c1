import CLITestSupport
import Foundation
import FuzzTargets
import Testing

/// The fuzzers' CI run: `Fuzz/run --smoke` builds the libFuzzer binary into
/// `.build-fuzz` and runs every target for a few seconds. CI runs exactly
/// `swift test`, so this is where it runs. `DEPOT_FUZZ_SMOKE=0` skips it
/// (the first build of `.build-fuzz` takes minutes).
@Suite struct FuzzSmokeTests {
    static let isEnabled = ProcessInfo.processInfo.environment["DEPOT_FUZZ_SMOKE"] != "0"

    @Test(.enabled(if: isEnabled, "DEPOT_FUZZ_SMOKE=0 skips the fuzz smoke run"), .timeLimit(.minutes(30)))
    func smokeRunOfEveryTargetFindsNoCrash() async throws {
        let script = Executables.root.appending(path: "Fuzz/run").path
        // At the lowest priority: its release build with ASan keeps both
        // cores busy for minutes, and the rest of the suite, run beside it,
        // waits on the main actor and on real-time guards.
        let run = try await spawn("/usr/bin/nice", ["-n", "19", "/bin/bash", script, "--smoke"], killAfter: .seconds(28 * 60))
        let report = "Fuzz/run --smoke exited \(run.status):\n\(run.output)\n\(run.error.split(separator: "\n").suffix(30).joined(separator: "\n"))"
        #expect(run.status == 0, "\(report)")
        let lines = run.output.split(separator: "\n").map(String.init)
        for target in FuzzTargets.all.map(\.name) {
            // "feed: 123456 executions in 15 s (8230/s), 0 crashes, corpus 87 inputs, coverage 1234 edges"
            guard let line = lines.first(where: { $0.hasPrefix("\(target): ") }) else {
                Issue.record("no line for \(target): \(report)")
                continue
            }
            let executions = Self.number(before: " executions", in: line)
            let crashes = Self.number(before: " crashes", in: line)
            #expect((executions ?? 0) > 0, "\(line)")
            #expect(crashes == 0, "\(line)\n\(report)")
        }
        #expect(lines.last?.hasPrefix("fuzzed \(FuzzTargets.all.count) targets") == true, "\(report)")
    }

    /// The whole number just before `label` in `line`.
    static func number(before label: String, in line: String) -> Int? {
        guard let range = line.range(of: label) else { return nil }
        let digits = line[..<range.lowerBound].reversed().prefix { $0.isNumber }
        return Int(String(digits.reversed()))
    }
}
