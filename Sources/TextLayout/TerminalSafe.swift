/// Text from the network, made safe to print on a terminal.
///
/// A feed title, a CRM name or a post may hold control characters, put there
/// on purpose or decoded from `&#x1b;` or `&amp;#x1b;`: printed as they
/// are, ESC and CSI sequences clear the screen, retitle the window or
/// recolour text, and bidi overrides make a line read backwards. Everything
/// the example apps print passes through ``terminalSafe(_:)``; the cache and
/// `--json` keep the real text (JSON escapes it).
extension TextLayout {
    /// `text` on one line, with nothing a terminal would act on:
    /// - tab, line feed and carriage return become a space;
    /// - other C0 controls and DEL show as their Control Pictures (`␛`, `␇`, `␡`);
    /// - C1 controls (U+0080–U+009F, CSI among them) show as `�`;
    /// - bidi embeddings, overrides and isolates (U+202A–U+202E,
    ///   U+2066–U+2069) are removed.
    ///
    /// For example, `terminalSafe("\u{1B}[2JHi")` is `"␛[2JHi"`. Text with
    /// none of these comes back unchanged, without a copy of its characters.
    public static func terminalSafe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var safe = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0A, 0x0D:
                safe.append(" ")
            case 0x00...0x1F:
                safe.append(Unicode.Scalar(0x2400 + scalar.value)!)
            case 0x7F:
                safe.append("\u{2421}")
            case 0x80...0x9F:
                safe.append("\u{FFFD}")
            case 0x202A...0x202E, 0x2066...0x2069:
                continue
            default:
                safe.append(scalar)
            }
        }
        return String(safe)
    }

    private static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
