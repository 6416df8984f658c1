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
        #expect(TextLayout.columns("a\tb") == 2, "a control character takes no column")
        #expect(TextLayout.columns("#️⃣") == 2, "a keycap starts with ASCII but is an emoji")
        #expect(TextLayout.columns("café · naïve") == 12)
        #expect(TextLayout.columns("‼") == 1 && TextLayout.columns("‼️") == 2, "a variation selector widens an emoji")
        #expect(TextLayout.columns("e\u{301}") == 1, "a combining mark joins its letter")
    }

    @Test func latinTextIsCountedLikeAnyOtherText() {
        // Latin text and punctuation take a scalar-counting shortcut; it must
        // agree with the character walk, and text with a control character,
        // a combining mark or an emoji must not take it.
        let lines = ["", " ", "Re: cache not updating", String(repeating: "x~ ", count: 70), "tab\there",
                     "Zoë — “quoted” … · 2 h ago", "cafe\u{301} 🥟 ‼️", "日本語 and Latin"]
        for line in lines {
            let walked = line.reduce(0) { $0 + TextLayout.columns($1) }
            #expect(TextLayout.columns(line) == walked, "\(line)")
            let fitted = TextLayout.fit(line, trailer: " · bnr · 2 h ago", width: 40)
            #expect(TextLayout.columns(fitted) == 40, "\(fitted)")
        }
        #expect(TextLayout.fit("The quick brown fox", trailer: "|", width: 10) == "The quic…|")
        #expect(TextLayout.fit("Zoë — “quoted” text", trailer: " · x", width: 14) == "Zoë — “qu… · x")
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

    /// What a terminal would act on is shown, dropped or made a space;
    /// everything else stays as it is.
    @Test func terminalSafeTextHasNothingATerminalActsOn() {
        #expect(TextLayout.terminalSafe("\u{1B}[2JHi") == "␛[2JHi")
        #expect(TextLayout.terminalSafe("ring\u{7}") == "ring␇")
        #expect(TextLayout.terminalSafe("back\u{8}space") == "back␈space")
        #expect(TextLayout.terminalSafe("a\tb\nc\rd") == "a b c d")
        #expect(TextLayout.terminalSafe("del\u{7F}") == "del␡")
        #expect(TextLayout.terminalSafe("c1 \u{9B}31m") == "c1 \u{FFFD}31m")
        #expect(TextLayout.terminalSafe("\u{202E}gpj.exe\u{2066}x\u{2069}") == "gpj.exex")
        #expect(TextLayout.terminalSafe("Zoë 日本 🥟") == "Zoë 日本 🥟")
        // Every line the apps fit is safe too, and measured as it prints.
        let fitted = TextLayout.fit("\u{1B}]0;pwned\u{7}", trailer: "\u{1B}[31m", width: 20)
        #expect(!fitted.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
        #expect(TextLayout.columns(fitted) == 20)
    }
}
