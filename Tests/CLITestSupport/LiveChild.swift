#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSpawnSupport
import Foundation
import Synchronization

/// A long-running child process a test talks to while it runs: its standard
/// output and error as lines, as they are written, a pipe for its standard
/// input, signals, and its exit status.
///
/// Like ``spawn(_:_:capture:environment:killAfter:)``, it uses posix_spawn
/// and threads of its own, never the cooperative pool, to block on pipes.
///
/// For example:
///
/// ```swift
/// let child = try LiveChild.start(path, ["watch", "--json"])
/// for await line in child.output { print(line); break }
/// child.send(SIGINT)
/// let status = await child.exitStatus()
/// ```
public final class LiveChild: Sendable {
    /// Lines of standard output (without their newline), until it closes.
    public let output: AsyncStream<String>
    /// Lines of standard error, until it closes.
    public let errors: AsyncStream<String>
    /// The child's process id.
    public let pid: pid_t

    private let input: Mutex<Int32>
    private let exit: Mutex<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>

    private init(pid: pid_t, input: Int32, output: AsyncStream<String>, errors: AsyncStream<String>) {
        self.pid = pid
        self.input = Mutex(input)
        self.output = output
        self.errors = errors
        self.exit = Mutex((nil, []))
    }

    /// Starts `path` with `arguments` (and `environment` over ours).
    public static func start(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws -> LiveChild {
        let inPipe = try closeOnExecPipe()
        let outPipe = try closeOnExecPipe()
        let errPipe = try closeOnExecPipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        depot_spawn_close_from(&actions, 3)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var variables = ProcessInfo.processInfo.environment
        variables.merge(environment) { _, new in new }
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
        close(inPipe[0])
        close(outPipe[1])
        close(errPipe[1])
        guard spawned == 0 else {
            [inPipe[1], outPipe[0], errPipe[0]].forEach { close($0) }
            throw SpawnError(description: "cannot start \(path): \(String(cString: strerror(spawned)))")
        }
        let child = LiveChild(pid: pid, input: inPipe[1], output: lines(of: outPipe[0]), errors: lines(of: errPipe[0]))
        Thread { child.reap() }.start()
        return child
    }

    /// Sends `signal` to the child, unless it has been reaped (its pid may be another's by then).
    public func send(_ signal: Int32) {
        exit.withLock { state in
            if state.status == nil { kill(pid, signal) }
        }
    }

    /// Closes the child's standard input: it reads its end.
    public func closeInput() {
        input.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    /// Waits for the child to end: its exit status, or 128 + the signal number.
    public func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = exit.withLock { state -> Int32? in
                if state.status == nil { state.waiters.append(continuation) }
                return state.status
            }
            if let status { continuation.resume(returning: status) }
        }
    }

    deinit {
        closeInput()
    }

    /// Waits for the child on this thread, then wakes the waiters. The reap
    /// and ``send(_:)`` exclude each other.
    private func reap() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1, errno == EINTR {}
        let waiters = exit.withLock { state -> [CheckedContinuation<Int32, Never>] in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1, errno == EINTR {}
            state.status = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            defer { state.waiters = [] }
            return state.waiters
        }
        let status = exit.withLock { $0.status ?? -1 }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    /// The lines read from `fd` by a thread of its own, until its end.
    private static func lines(of fd: Int32) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        Thread {
            var pending = Data()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(fd, &buffer, buffer.count)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                pending.append(buffer, count: count)
                while let newline = pending.firstIndex(of: 0x0A) {
                    continuation.yield(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
            if !pending.isEmpty { continuation.yield(String(decoding: pending, as: UTF8.self)) }
            close(fd)
            continuation.finish()
        }.start()
        return stream
    }
}
