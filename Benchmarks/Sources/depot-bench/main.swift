// depot-bench: Depot's benchmarks. Always run in release mode:
//
//   swift run -c release --package-path Benchmarks depot-bench transport [requests] [repeats]
//
// `serve` is used internally: the transport and outbox benchmarks start this
// binary again as their loopback server, so server CPU is not counted as client CPU.
// `livefollower` too: livelatency's app in another process, and `valueprobe`:
// one of `values`' measurements in a fresh process.
import Foundation

func run(_ arguments: [String]) async throws {
switch arguments.first {
case "serve":
    try await BenchServer.run(staticFile: arguments.count > 1 ? arguments[1] : nil)
case "transport", nil:
    let requests = arguments.count > 1 ? Int(arguments[1]) ?? 5000 : 5000
    let repeats = arguments.count > 2 ? Int(arguments[2]) ?? 3 : 3
    try await TransportBench.run(requests: requests, repeats: repeats)
case "ingest":
    try await IngestBench.run(items: arguments.count > 1 ? Int(arguments[1]) ?? 100_000 : 100_000, repeats: arguments.count > 2 ? Int(arguments[2]) ?? 3 : 3)
case "changesets":
    try await ChangeSetBench.run(rows: arguments.count > 1 ? Int(arguments[1]) ?? 10_000 : 10_000, repeats: arguments.count > 2 ? Int(arguments[2]) ?? 5 : 5)
case "conditions":
    try await ConditionsBench.run(writeTraces: arguments.count > 1 ? arguments[1] : nil)
case "bigfeed":
    try await BigFeedBench.run(binaries: arguments.count > 1 ? arguments[1] : ".build/release", items: arguments.count > 2 ? Int(arguments[2]) ?? 1_000_000 : 1_000_000, repeats: arguments.count > 3 ? Int(arguments[3]) ?? 3 : 3)
case "nerdfeed":
    try await NerdfeedBench.run(binaries: arguments.count > 1 ? arguments[1] : ".build/release", repeats: arguments.count > 2 ? Int(arguments[2]) ?? 3 : 3)
case "firstrows":
    try await FirstRowsBench.run(repetitions: arguments.count > 1 ? Int(arguments[1]) ?? 200 : 200, binaries: arguments.count > 2 ? arguments[2] : nil, trivialSwift: arguments.count > 3 ? arguments[3] : nil)
case "values":
    try await ValuesBench.run(iterations: arguments.count > 1 ? Int(arguments[1]) ?? 50 : 50)
case "valueprobe":
    try await ValuesBench.probe(arguments)
case "overhead":
    try await OverheadBench.run(operations: arguments.count > 1 ? Int(arguments[1]) ?? 100_000 : 100_000)
case "evict":
    try await EvictBench.run(rows: arguments.count > 1 ? Int(arguments[1]) ?? 200_000 : 200_000, repeats: arguments.count > 2 ? Int(arguments[2]) ?? 3 : 3, watch: arguments.count > 3 ? EvictBench.Watch(rawValue: arguments[3]) ?? .all : .all)
case "outbox":
    try await OutboxBench.run(count: arguments.count > 1 ? Int(arguments[1]) ?? 1000 : 1000, rounds: arguments.count > 2 ? Int(arguments[2]) ?? 5 : 5)
case "reallink":
    try await RealLinkBench.run(arguments: arguments)
case "livelatency":
    try await LiveLatencyBench.run(binaries: arguments.count > 1 ? arguments[1] : ".build/release", seconds: arguments.count > 2 ? Int(arguments[2]) ?? 30 : 30)
case "livefollower":
    guard arguments.count > 1, let base = URL(string: arguments[1]) else { exit(2) }
    try await LiveLatencyBench.follow(base: base, floorRate: arguments.count > 2 ? Int(arguments[2]) ?? 10 : 10)
case "catchup":
    try await CatchUpBench.run(binaries: arguments.count > 1 ? arguments[1] : ".build/release", rows: 50_000, changes: 10_000, repeats: arguments.count > 2 ? Int(arguments[2]) ?? 5 : 5)
case "livememory":
    try await LiveMemoryBench.run(events: arguments.count > 1 ? Int(arguments[1]) ?? 1_000_000 : 1_000_000, perChunk: arguments.count > 2 ? Int(arguments[2]) ?? 1 : 1)
case "allocations":
    try await AllocationBench.run(operations: arguments.count > 1 ? Int(arguments[1]) ?? 10_000 : 10_000)
case "soak":
    guard let duration = SoakBench.parseDuration(arguments.count > 1 ? arguments[1] : "10m"), let seed = arguments.count > 2 ? UInt64(arguments[2]) : 1 else {
        print("usage: depot-bench soak [duration: seconds, or 90s, 10m, 1h] [seed]")
        exit(2)
    }
    exit(try await SoakBench.run(duration: duration, seed: seed) ? 0 : 1)
default:
    print("usage: depot-bench [transport [requests] [repeats] | overhead [operations] | allocations [operations] | ingest [items] [repeats] | outbox [count] [rounds] | changesets [rows] [repeats] | evict [rows] [repeats] [all|page] | reallink [repeats] [lows] [depot-server path] | conditions [trace folder] | nerdfeed [release bin folder] [repeats] | firstrows [repetitions] [release bin folder] [trivial Swift program] | values [iterations] | bigfeed [release bin folder] [items] [repeats] | soak [duration] [seed] | livelatency [release bin folder] [seconds] | catchup [release bin folder] [repeats] | livememory [events] [events a chunk] | serve]")
    exit(2)
}
}

let arguments = Array(CommandLine.arguments.dropFirst())
// The commit and date of the summary rows, read before a subcommand can change the tree.
// Not in `valueprobe`: it would warm up the process it measures cold.
if !["serve", "livefollower", "valueprobe"].contains(arguments.first) { _ = SummaryRow.run }
do {
    try await run(arguments)
} catch {
    // One sentence, not a crash: a missing trace folder, an unreadable binary.
    let path = (error as? CocoaError)?.filePath.map { " (\($0))" } ?? ""
    FileHandle.standardError.write(Data("depot-bench \(arguments.first ?? "transport"): \(error.localizedDescription)\(path)\n".utf8))
    exit(1)
}
