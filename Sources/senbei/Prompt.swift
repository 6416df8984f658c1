#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Asking for credentials on the terminal, without echoing the password.
enum Prompt {
    /// Whether there is someone to ask: standard input and error are a terminal.
    static var isAvailable: Bool { isatty(0) == 1 && isatty(2) == 1 }

    /// Writes `label` on standard error and reads one line; `nil` at end of input.
    /// With `secret`, what is typed is not shown. The read blocks a thread of its
    /// own, so neither the main actor nor a cooperative thread waits on the keyboard.
    static func ask(_ label: String, secret: Bool = false) async -> String? {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: askBlocking(label, secret: secret)) }.start()
        }
    }

    private static func askBlocking(_ label: String, secret: Bool) -> String? {
        FileHandle.standardError.write(Data(label.utf8))
        guard secret else { return readLine() }
        var saved = termios()
        tcgetattr(0, &saved)
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(0, TCSANOW, &quiet)
        defer {
            tcsetattr(0, TCSANOW, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return readLine()
    }
}
