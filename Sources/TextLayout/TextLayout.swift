import Foundation

/// Fixed-width text for the example apps' terminal views and printed lists.
///
/// Widths are terminal columns: most characters take one, East Asian wide
/// characters and emoji take two.
public enum TextLayout {
    /// Pads or truncates `text` so that `text + trailer` is exactly `width`
    /// columns, after ``terminalSafe(_:)``.
    ///
    /// For example: `fit("Shipped it.", trailer: "  @aaronh", width: 24)` is
    /// `"Shipped it.      @aaronh"`; a longer text ends in "…".
    public static func fit(_ text: String, trailer: String, width: Int) -> String {
        // Measured and cut as printed: controls shown visibly, bidi overrides gone.
        let text = terminalSafe(text)
        let trailer = terminalSafe(trailer)
        let room = max(1, width - columns(trailer))
        var head = text
        var used = columns(head)
        if used > room, singleColumnScalars(text) != nil {
            // One column per scalar: cut the scalars, no character walk.
            head = String(String.UnicodeScalarView(text.unicodeScalars.prefix(room - 1))) + "…"
            used = room
        } else if used > room {
            // Keep whole characters that fit in room - 1 columns, then the ellipsis.
            var kept = ""
            var keptColumns = 0
            for character in text {
                let next = columns(character)
                if keptColumns + next > room - 1 { break }
                kept.append(character)
                keptColumns += next
            }
            head = kept + "…"
            used = keptColumns + 1
        }
        return head + String(repeating: " ", count: max(0, room - used)) + trailer
    }

    /// The columns `text` takes on a terminal.
    public static func columns(_ text: String) -> Int {
        // Most lines are Latin text and punctuation: one column per scalar,
        // counted without breaking the text into characters and looking up
        // Unicode properties (a 1,000-line list spent most of its printing
        // time there).
        singleColumnScalars(text) ?? text.reduce(0) { $0 + columns($1) }
    }

    /// The number of scalars in `text` when every one of them is a
    /// ``isSingleColumn(_:)`` scalar, so that each is a character of one column;
    /// `nil` otherwise.
    static func singleColumnScalars(_ text: String) -> Int? {
        var count = 0
        for scalar in text.unicodeScalars {
            guard isSingleColumn(scalar) else { return nil }
            count += 1
        }
        return count
    }

    /// Scalars that take one column and never join a neighbour into one
    /// character: printable ASCII, Latin-1 and Latin Extended letters, and
    /// general punctuation such as "–", "“", "•" and "…" (not the zero-width
    /// joiners and marks, nor the emoji "‼" and "⁉" that a variation selector
    /// can widen: the selector is not in this set, so such text takes the walk).
    static func isSingleColumn(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x20..<0x7F, 0xA0..<0x300, 0x2010...0x2027, 0x2030...0x205E: true
        default: false
        }
    }

    /// The columns one character takes: 2 for East Asian wide characters and
    /// emoji shown as pictures, 0 for control characters, 1 otherwise.
    public static func columns(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let scalar = scalars.first else { return 0 }
        if isSingleColumn(scalar), scalars.count == 1 { return 1 }
        if scalar.properties.generalCategory == .control { return 0 }
        if scalar.properties.isEmojiPresentation || character.unicodeScalars.contains("\u{FE0F}") { return 2 }
        switch scalar.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
             0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
             0xFFE0...0xFFE6, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }

    /// A progress bar `width` characters wide: `[#####.....]  50%`.
    public static func progressBar(_ fraction: Double, width: Int) -> String {
        let inner = max(4, width - 7)
        let filled = Int((min(1, max(0, fraction)) * Double(inner)).rounded())
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: inner - filled) + "] " + String(format: "%3d%%", Int(fraction * 100))
    }
}
