import Foundation

/// Fixed-width text for the example apps' terminal views and printed lists.
public enum TextLayout {
    /// Pads or truncates `text` so that `text + trailer` is exactly `width` characters.
    ///
    /// For example: `fit("Shipped it.", trailer: "  @aaronh", width: 24)` is
    /// `"Shipped it.      @aaronh"`; a longer text ends in "…".
    public static func fit(_ text: String, trailer: String, width: Int) -> String {
        let room = max(1, width - trailer.count)
        var head = text
        if head.count > room { head = String(head.prefix(max(0, room - 1))) + "…" }
        return head + String(repeating: " ", count: max(0, room - head.count)) + trailer
    }

    /// A progress bar `width` characters wide: `[#####.....]  50%`.
    public static func progressBar(_ fraction: Double, width: Int) -> String {
        let inner = max(4, width - 7)
        let filled = Int((min(1, max(0, fraction)) * Double(inner)).rounded())
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: inner - filled) + "] " + String(format: "%3d%%", Int(fraction * 100))
    }
}
