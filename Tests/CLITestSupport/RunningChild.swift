#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSpawnSupport
import Foundation
import Synchronization

/// A child process that runs while the test reads its output line by line:
/// for commands that never end by themselves (`timeline --follow`). Spawned
/// like ``spawn(_:_:capture:environment:killAfter:)``, with posix_spawn and a
/// reading thread of its own.
public final class RunningChild: Sendable {
    private struct State {
        var lines: [String] = []
        var partial = Data()
        var error = Data()
        var ended = false
        var waiters: [(count: Int, continuation: CheckedContinuation<[String], Never>)] = []
        var status: Int32?
        var exitWaiters: [CheckedContinuation<Int32, Never>] = []
    }

    /// The child's process id.
    public let pid: pid_t
    private let state = Mutex(State())
    /// Held while signalling, and by the reaper: a reaped pid is never signalled.
    private let reaped = Mutex(false)

    /// Starts `path` with `arguments`, its standard input `/dev/null`.
    public init(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let outPipe = try closeOnExecPipe()
        let errPipe = try closeOnExecPipe()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        for fd in outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
        depot_spawn_close_from(&actions, 3)
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var variables = ProcessInfo.processInfo.environment
        variables.merge(environment) { _, new in new }
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
        close(outPipe[1])
        close(errPipe[1])
        guard spawned == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            throw SpawnError(description: "cannot start \(path): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
        let thread = Thread { [self] in self.read(out: outPipe[0], err: errPipe[0]) }
        thread.start()
    }

    /// Waits until the child printed at least `count` lines (or ended), and
    /// returns every line so far.
    public func lines(atLeast count: Int) async -> [String] {
        await withCheckedContinuation { continuation in
            let ready: [String]? = state.withLock { state in
                if state.lines.count >= count || state.ended { return state.lines }
                state.waiters.append((count, continuation))
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Every line printed so far.
    public var lines: [String] { state.withLock { $0.lines } }

    /// What the child wrote to standard error so far.
    public var errorOutput: String { state.withLock { String(decoding: $0.error, as: UTF8.self) } }

    /// Sends `signal` (SIGKILL by default), unless the child was reaped.
    public func kill(_ signal: Int32 = SIGKILL) {
        reaped.withLock { isReaped in
            if !isReaped { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Waits for the child to end: its exit status, or 128 + the signal.
    public func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status: Int32? = state.withLock { state in
                if let status = state.status { return status }
                state.exitWaiters.append(continuation)
                return nil
            }
            if let status { continuation.resume(returning: status) }
        }
    }

    private func read(out: Int32, err: Int32) {
        var fds = [pollfd(fd: out, events: Int16(POLLIN), revents: 0), pollfd(fd: err, events: Int16(POLLIN), revents: 0)]
        var open = 2
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while open > 0 {
            guard poll(&fds, nfds_t(fds.count), -1) > 0 else { continue }
            for index in fds.indices where fds[index].fd >= 0 && fds[index].revents != 0 {
                let count = Glibc.read(fds[index].fd, &buffer, buffer.count)
                if count > 0 {
                    let chunk = Data(buffer[0..<count])
                    if index == 0 { received(chunk) } else { state.withLock { $0.error.append(chunk) } }
                } else {
                    close(fds[index].fd)
                    fds[index].fd = -1
                    open -= 1
                }
            }
        }
        let woken = state.withLock { state in
            state.ended = true
            defer { state.waiters.removeAll() }
            return (state.waiters.map(\.continuation), state.lines)
        }
        for waiter in woken.0 { waiter.resume(returning: woken.1) }
        var status: Int32 = 0
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1, errno == EINTR {}
        reaped.withLock { isReaped in
            while waitpid(pid, &status, 0) == -1, errno == EINTR {}
            isReaped = true
        }
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let waiters = state.withLock { state in
            state.status = exit
            defer { state.exitWaiters.removeAll() }
            return state.exitWaiters
        }
        for waiter in waiters { waiter.resume(returning: exit) }
    }

    private func received(_ chunk: Data) {
        let ready = state.withLock { state -> [(CheckedContinuation<[String], Never>, [String])] in
            state.partial.append(chunk)
            while let newline = state.partial.firstIndex(of: UInt8(ascii: "\n")) {
                state.lines.append(String(decoding: state.partial[state.partial.startIndex..<newline], as: UTF8.self))
                state.partial.removeSubrange(state.partial.startIndex...newline)
            }
            let lines = state.lines
            var ready: [(CheckedContinuation<[String], Never>, [String])] = []
            state.waiters.removeAll { waiter in
                guard lines.count >= waiter.count else { return false }
                ready.append((waiter.continuation, lines))
                return true
            }
            return ready
        }
        for (continuation, lines) in ready { continuation.resume(returning: lines) }
    }
}
