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
        /// Control-C. Raw mode delivers it as a key, so the app quits through
        /// its own shutdown path instead of being killed mid-post.
        case interrupt
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
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | ISIG)
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
        // The views make network text safe (TextLayout.fit, terminalSafe) and may add styling of their own.
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
            var decoder = KeyDecoder()
            var byte: UInt8 = 0
            while read(0, &byte, 1) == 1 {
                if let key = decoder.feed(byte) { continuation.yield(key) }
                // A lone ESC followed by nothing within 50 ms is the escape key itself.
                if decoder.isAwaitingEscapeSequence {
                    var next = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                    if poll(&next, 1, 50) == 0, let key = decoder.flushEscape() { continuation.yield(key) }
                }
            }
            continuation.finish()
        }
        thread.start()
        return stream
    }
}

/// Turns the bytes a terminal sends into keys: UTF-8 characters whole, arrow
/// sequences, control keys; other escape sequences (Home, Delete, function
/// keys, Alt+key) are read to their end and ignored.
public struct KeyDecoder: Sendable {
    private var pending: [UInt8] = []

    /// Makes a decoder with nothing pending.
    public init() {}

    /// Whether the bytes so far are a lone ESC: the escape key, unless more follows.
    public var isAwaitingEscapeSequence: Bool { pending == [0x1B] }

    /// The escape key, when a lone ESC is pending (call it when no byte followed).
    public mutating func flushEscape() -> Terminal.Key? {
        guard isAwaitingEscapeSequence else { return nil }
        pending.removeAll()
        return .escape
    }

    /// Takes one byte; returns the key it completes, if any.
    public mutating func feed(_ byte: UInt8) -> Terminal.Key? {
        pending.append(byte)
        if pending[0] == 0x1B { return escapeSequence() }
        if pending.count == 1 {
            switch byte {
            case 0x03: return done(.interrupt)
            case 0x7F, 0x08: return done(.backspace)
            case 0x0D, 0x0A: return done(.enter)
            case 0x09: return done(.tab)
            default: break
            }
        }
        let length: Int
        switch pending[0] {
        case 0x00..<0x80: length = 1
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return done(nil)  // not a lead byte
        }
        guard pending.count >= length else { return nil }
        return done(String(validating: pending, as: UTF8.self)?.first.map(Key.character))
    }

    private typealias Key = Terminal.Key

    private mutating func escapeSequence() -> Key? {
        guard pending.count >= 2 else { return nil }
        guard pending[1] == 0x5B || pending[1] == 0x4F else { return done(nil) }  // Alt+key: ignored
        guard pending.count >= 3 else { return nil }
        let last = pending[pending.count - 1]
        guard (0x40...0x7E).contains(last) else {
            return pending.count < 16 ? nil : done(nil)  // parameters go on; a runaway sequence is dropped
        }
        switch (pending.count, last) {
        case (3, 0x41): return done(.up)
        case (3, 0x42): return done(.down)
        case (3, 0x43): return done(.right)
        case (3, 0x44): return done(.left)
        default: return done(nil)
        }
    }

    private mutating func done(_ key: Key?) -> Key? {
        pending.removeAll()
        return key
    }
}
