import CLITestSupport
import Foundation
import FuzzTargets
import Testing

/// Every committed input of every fuzz target, run without the sanitizer: the
/// seeds in `Fuzz/Corpus/<target>/` and the inputs that once crashed, in
/// `Fuzz/Crashes/<target>/`. A fuzz target stops its process when an
/// invariant breaks, so each target's inputs run in an exit test, a child
/// process: a regression fails its test, with the target's message and the
/// input's path, instead of ending the whole test run.
@Suite struct FuzzRegressionTests {
    static let fuzz = Executables.root.appending(path: "Fuzz")
    static let targetNames = FuzzTargets.all.map(\.name)

    static func corpus(_ target: String) -> URL { fuzz.appending(path: "Corpus/\(target)") }
    static func crashes(_ target: String) -> URL { fuzz.appending(path: "Crashes/\(target)") }

    @Test(arguments: targetNames)
    func everyTargetHasASmallSeedCorpus(target: String) {
        let seeds = FuzzTargets.inputFiles(in: [Self.corpus(target)])
        #expect(!seeds.isEmpty, "Fuzz/Corpus/\(target)/ has no seeds")
        #expect(seeds.count <= 40, "Fuzz/Corpus/\(target)/ has \(seeds.count) seeds: keep the committed corpus small")
    }

    @Test(arguments: targetNames)
    func committedInputsRunClean(target: String) async {
        let paths = [Self.corpus(target), Self.crashes(target)].map(\.path)
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) { [target = target as String, paths = paths as [String]] in
            guard let fuzzTarget = FuzzTargets.named(target) else { exit(2) }
            try FuzzTargets.replay(fuzzTarget, paths: paths.map { URL(fileURLWithPath: $0) }, announcing: true)
        }
        if let result, result.exitStatus != .exitCode(EXIT_SUCCESS) {
            // The last path printed is the input that failed; the target's message follows it.
            let output = String(decoding: result.standardErrorContent, as: UTF8.self)
            Issue.record("\(target) failed on a committed input:\n\(output.split(separator: "\n").suffix(12).joined(separator: "\n"))")
        }
    }

    @Test func theRunScriptListsTheSameTargetsAsTheDriver() throws {
        // Fuzz/run asks the fuzz build for its targets; the corpus folders must match them.
        let folders = try FileManager.default.contentsOfDirectory(atPath: Self.fuzz.appending(path: "Corpus").path)
            .filter { !$0.hasPrefix(".") }.sorted()
        #expect(folders == Self.targetNames.sorted())
        #expect(FileManager.default.isExecutableFile(atPath: Self.fuzz.appending(path: "run").path))
    }
}
