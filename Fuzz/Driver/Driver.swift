import Foundation
import FuzzTargets

#if FUZZING
// Built by `Fuzz/run` with `--sanitize=fuzzer --sanitize=address -Xswiftc -DFUZZING`:
// libFuzzer supplies `main`, and calls the two functions below.

/// The target this process fuzzes, named by `DEPOT_FUZZ_TARGET`.
private let selectedTarget: FuzzTarget? = ProcessInfo.processInfo.environment["DEPOT_FUZZ_TARGET"].flatMap(FuzzTargets.named)

/// libFuzzer's set-up hook: refuses to start without a known target, and
/// with `DEPOT_FUZZ_TARGET=--list` prints the targets' names, one a line, and exits.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzerInitialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    if ProcessInfo.processInfo.environment["DEPOT_FUZZ_TARGET"] == "--list" {
        FileHandle.standardOutput.write(Data(FuzzTargets.all.map { "\($0.name)\n" }.joined().utf8))
        _exit(0)  // not exit: LeakSanitizer's check at exit would report the strings still alive
    }
    guard selectedTarget != nil else {
        let names = FuzzTargets.all.map(\.name).joined(separator: ", ")
        FileHandle.standardError.write(Data("depot-fuzz: set DEPOT_FUZZ_TARGET to one of: \(names)\n".utf8))
        _exit(64)
    }
    selectedTarget?.prepare()
    return 0
}

/// libFuzzer's entry point: runs one input through the selected target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzerTestOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let data = if let start, count > 0 { Data(bytes: start, count: count) } else { Data() }
    selectedTarget?.run(data)
    return 0
}
#else
/// Replays saved inputs through a fuzz target without the sanitizer, to
/// debug a crash that `Fuzz/run` found:
///
/// ```
/// swift run depot-fuzz feed Fuzz/Crashes/feed/crash-1234   # files or folders
/// swift run depot-fuzz --list
/// ```
///
/// Each input's path goes to standard error before it runs, so the last one
/// printed before a crash is the culprit.
@main
enum Driver {
    static func main() throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments == ["--list"] {
            for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
            return
        }
        guard arguments.count >= 2, let target = FuzzTargets.named(arguments[0]) else {
            let names = FuzzTargets.all.map(\.name).joined(separator: "|")
            FileHandle.standardError.write(Data("usage: depot-fuzz (\(names)) FILE-OR-FOLDER...\n       depot-fuzz --list\n".utf8))
            exit(64)
        }
        let count = try FuzzTargets.replay(target, paths: arguments.dropFirst().map { URL(fileURLWithPath: $0) }, announcing: true)
        print("\(target.name): \(count) inputs ran clean")
    }
}
#endif
