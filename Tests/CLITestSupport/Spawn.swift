#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSpawnSupport
import Foundation
import Synchronization

/// What a child process printed and how it ended.
public struct ChildResult: Sendable {
    /// The exit status, or 128 + the signal number.
    public var status: Int32
    /// Standard output.
    public var output: String
    /// Standard error.
    public var error: String
}

/// Runs `path` with `arguments` (and `environment` set over ours) to completion on a thread of its own and
/// returns what it printed. posix_spawn and waitpid directly: Foundation's
/// `Process` on Linux waits through a run loop and SIGCHLD machinery that hung
/// under parallel tests, and a blocked cooperative thread (two on a 2-core
/// machine) could starve an in-process server the child talks to.
///
/// Output is read only when `capture` is true: a command that starts a daemon
/// (tmux's server) would hand it our pipe, which would then never reach its end.
///
/// With `killAfter`, the child gets SIGKILL that long after it started, unless
/// it ended first (status 137 when the kill landed).
public func spawn(_ path: String, _ arguments: [String], capture: Bool = true, environment: [String: String] = [:], killAfter: Duration? = nil) async throws -> ChildResult {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try spawnAndWait(path, arguments, capture: capture, environment: environment, killAfter: killAfter) })
        }
        thread.start()
    }
}

/// A pipe whose two ends close on exec, as `[read, write]`. Tests spawn
/// children in parallel: a child spawned by another thread while this pipe is
/// open would otherwise inherit its write end, and the reader would see no end
/// of output until that child exited. (A timeline test waited past its 120 s
/// limit for the fuzz smoke run, which had inherited its pipe.) posix_spawn's
/// dup2 onto 1 and 2 gives the intended child its own copies without the flag.
public func closeOnExecPipe() throws -> [Int32] {
    var fds: [Int32] = [-1, -1]
    guard depot_pipe_cloexec(&fds) == 0 else { throw SpawnError(description: "pipe failed: \(String(cString: strerror(errno)))") }
    return fds
}

/// Why a child could not be run.
public struct SpawnError: Error, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}

private func spawnAndWait(_ path: String, _ arguments: [String], capture: Bool, environment: [String: String], killAfter: Duration?) throws -> ChildResult {
    var outPipe: [Int32] = [-1, -1]
    var errPipe: [Int32] = [-1, -1]
    if capture {
        outPipe = try closeOnExecPipe()
        errPipe = try closeOnExecPipe()
    }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    if capture {
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        for fd in outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
    } else {
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    }
    // And the child gets nothing else of ours: another test's descriptors
    // (a pipe made without the flag, a server's socket) stay here.
    depot_spawn_close_from(&actions, 3)
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    // Our environment, with `environment`'s variables set over it.
    var variables = ProcessInfo.processInfo.environment
    variables.merge(environment) { _, new in new }
    let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { envp.forEach { free($0) } }
    let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
    if capture {
        close(outPipe[1])
        close(errPipe[1])
    }
    guard spawned == 0 else {
        if capture { close(outPipe[0]); close(errPipe[0]) }
        throw SpawnError(description: "cannot start \(path): \(String(cString: strerror(spawned)))")
    }
    // The kill and the reaping exclude each other, so a reaped pid (which the
    // system may give to another process) is never signalled.
    let reaped = Mutex(false)
    if let killAfter {
        let (seconds, attoseconds) = killAfter.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        let child = pid
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) {
            reaped.withLock { isReaped in
                if !isReaped { kill(child, SIGKILL) }
            }
        }
    }
    var output = Data()
    var error = Data()
    if capture {
        // Drain both pipes with poll, so that neither can fill up and block the child.
        var fds = [pollfd(fd: outPipe[0], events: Int16(POLLIN), revents: 0), pollfd(fd: errPipe[0], events: Int16(POLLIN), revents: 0)]
        var open = 2
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while open > 0 {
            guard poll(&fds, nfds_t(fds.count), -1) > 0 else { continue }
            for index in fds.indices where fds[index].fd >= 0 && fds[index].revents != 0 {
                let count = read(fds[index].fd, &buffer, buffer.count)
                if count > 0 {
                    if index == 0 { output.append(buffer, count: count) } else { error.append(buffer, count: count) }
                } else {
                    close(fds[index].fd)
                    fds[index].fd = -1
                    open -= 1
                }
            }
        }
    }
    var status: Int32 = 0
    // Wait without reaping, then reap under the lock.
    var info = siginfo_t()
    while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1, errno == EINTR {}
    reaped.withLock { isReaped in
        while waitpid(pid, &status, 0) == -1, errno == EINTR {}
        isReaped = true
    }
    let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return ChildResult(status: exitStatus, output: String(decoding: output, as: UTF8.self), error: String(decoding: error, as: UTF8.self))
}
