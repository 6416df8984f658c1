import Testing
import TextLayout

/// Lines fitted to terminal columns, wide characters included.
struct TextLayoutTests {
    @Test func columnsOfCharacters() {
        #expect(TextLayout.columns("abc") == 3)
        #expect(TextLayout.columns("Zoë") == 3, "a combining accent is part of one character")
        #expect(TextLayout.columns("日本") == 4)
        #expect(TextLayout.columns("🥟") == 2)
        #expect(TextLayout.columns("❤️") == 2, "text-style heart shown as emoji")
        #expect(TextLayout.columns("■ □ ─ …") == 7)
    }

    @Test func fitPadsAndCutsByColumns() {
        #expect(TextLayout.fit("Shipped it.", trailer: "  @aaronh", width: 24) == "Shipped it.      @aaronh")
        #expect(TextLayout.fit("abcdefgh", trailer: "", width: 5) == "abcd…")
        let wide = TextLayout.fit("post> Zoë 🥟", trailer: "  ⏎ send", width: 30)
        #expect(TextLayout.columns(wide) == 30)
        #expect(wide.hasSuffix("  ⏎ send"))
        // A wide character that would straddle the edge is left out, not split.
        #expect(TextLayout.fit("日本語", trailer: "", width: 4) == "日… ")
        #expect(TextLayout.columns(TextLayout.fit("日本語テキスト", trailer: "|", width: 9)) == 9)
    }
}
