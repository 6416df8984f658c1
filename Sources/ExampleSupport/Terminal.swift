#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// The terminal in raw mode on the alternate screen, and the keys typed into it.
///
/// Shared by the example apps' interactive views. Make one, draw whole screens
/// with ``draw(_:)``, read ``keys()``, and call ``restore()`` before exiting.
public final class Terminal: Sendable {
    /// A key press.
    public enum Key: Equatable, Sendable {
        /// A printable character.
        case character(Character)
        /// Arrows, return, tab, escape and backspace.
        case up, down, left, right, enter, tab, escape, backspace
    }

    /// The settings to restore, until they are restored.
    private let original: Mutex<termios?>

    /// Whether standard input and output are a terminal.
    public static var isInteractive: Bool { isatty(0) == 1 && isatty(1) == 1 }

    /// Enters raw mode and the alternate screen, and hides the cursor.
    public init() {
        var saved = termios()
        tcgetattr(0, &saved)
        original = Mutex(saved)
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON)
        withUnsafeMutableBytes(of: &raw.c_cc) { bytes in
            bytes[Int(VMIN)] = 1
            bytes[Int(VTIME)] = 0
        }
        tcsetattr(0, TCSANOW, &raw)
        write("\u{1B}[?1049h\u{1B}[?25l")
    }

    /// Leaves raw mode and the alternate screen.
    public func restore() {
        guard var saved = original.withLock({ $0.take() }) else { return }
        write("\u{1B}[?25h\u{1B}[?1049l")
        tcsetattr(0, TCSANOW, &saved)
    }

    /// The terminal's size, or 80×24 when it cannot tell.
    public var size: (columns: Int, rows: Int) {
        var window = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &window) == 0, window.ws_col > 0, window.ws_row > 0 else { return (80, 24) }
        return (Int(window.ws_col), Int(window.ws_row))
    }

    /// Replaces the screen with `lines` in one write.
    public func draw(_ lines: [String]) {
        write("\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
    }

    /// Writes `text` to standard output as it is.
    public func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Keys as they are typed. A dedicated thread blocks in `read`, so no
    /// cooperative-pool thread waits on the keyboard.
    public func keys() -> AsyncStream<Key> {
        let (stream, continuation) = AsyncStream<Key>.makeStream()
        let thread = Thread {
            var pending: [UInt8] = []
            var byte: UInt8 = 0
            while read(0, &byte, 1) == 1 {
                pending.append(byte)
                // Escape sequences for the arrows: ESC [ A / ESC [ B. A lone ESC
                // (nothing follows within 50 ms) is the escape key itself.
                if pending == [0x1B] {
                    var next = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                    if poll(&next, 1, 50) > 0 { continue }
                    pending.removeAll()
                    continuation.yield(.escape)
                    continue
                }
                if pending == [0x1B, 0x5B] { continue }
                let key: Key?
                switch pending {
                case [0x1B, 0x5B, 0x41]: key = .up
                case [0x1B, 0x5B, 0x42]: key = .down
                case [0x1B, 0x5B, 0x43]: key = .right
                case [0x1B, 0x5B, 0x44]: key = .left
                case [0x7F], [0x08]: key = .backspace
                case [0x0D], [0x0A]: key = .enter
                case [0x09]: key = .tab
                default:
                    if pending.first == 0x1B, pending.count >= 3 { key = .escape } else {
                        key = String(bytes: pending, encoding: .utf8)?.first.map(Key.character)
                    }
                }
                pending.removeAll()
                if let key { continuation.yield(key) }
            }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}
