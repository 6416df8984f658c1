#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation

/// The ways a long-running command that is not a full-screen view is asked to
/// end: SIGINT (control-C), SIGTERM, and the end of standard input when it is
/// a terminal (control-D) or a pipe. (A full-screen view reads control-C as a
/// key instead, in raw mode.) Standard input from `/dev/null` or a file never
/// ends the command: `senbei watch > log &` keeps running.
///
/// After the first request a second SIGINT or SIGTERM ends the process at
/// once, in case the orderly shutdown takes too long.
///
/// For example:
///
/// ```swift
/// let stop = StopRequests()
/// for await reason in stop.requests { print("stopping: \(reason)"); break }
/// ```
final class StopRequests: Sendable {
    /// Why the command is asked to end, once per request.
    let requests: AsyncStream<String>

    /// The signal sources, kept alive for as long as this is. `@unchecked`
    /// sound: set once in `init`, only read (by `deinit`) afterwards, and a
    /// dispatch source is thread-safe.
    private struct Sources: @unchecked Sendable {
        var values: [any DispatchSourceSignal]
    }

    private let sources: Sources

    /// Starts listening: signals are handled here from now on instead of
    /// ending the process.
    init() {
        let (requests, continuation) = AsyncStream<String>.makeStream()
        self.requests = requests
        var sources: [any DispatchSourceSignal] = []
        for (number, name) in [(SIGINT, "interrupted"), (SIGTERM, "terminated")] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                // The next one is not caught: a second control-C ends the process.
                signal(number, SIG_DFL)
                continuation.yield(name)
            }
            source.resume()
            sources.append(source)
        }
        self.sources = Sources(values: sources)
        if Self.inputCanEnd {
            // A thread of its own blocks on standard input, not a cooperative one.
            Thread {
                var buffer = [UInt8](repeating: 0, count: 4_096)
                while true {
                    let count = read(0, &buffer, buffer.count)
                    if count > 0 { continue }
                    if count < 0, errno == EINTR { continue }
                    break
                }
                continuation.yield("end of input")
            }.start()
        }
    }

    deinit {
        for source in sources.values { source.cancel() }
    }

    /// Whether standard input is a terminal or a pipe: an input whose end
    /// means the user (or the program feeding it) is done.
    private static var inputCanEnd: Bool {
        if isatty(0) == 1 { return true }
        var info = stat()
        guard fstat(0, &info) == 0 else { return false }
        return (info.st_mode & S_IFMT) == S_IFIFO
    }
}
