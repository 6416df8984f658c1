import ExampleSupport
import Testing

/// The terminal's bytes as keys: what the example apps' views receive.
struct KeyDecoderTests {
    func keys(_ bytes: [UInt8], flushingEscape: Bool = false) -> [Terminal.Key] {
        var decoder = KeyDecoder()
        var keys = bytes.compactMap { decoder.feed($0) }
        if flushingEscape, let key = decoder.flushEscape() { keys.append(key) }
        return keys
    }

    @Test func asciiControlKeysAndArrows() {
        #expect(keys(Array("hi".utf8)) == [.character("h"), .character("i")])
        #expect(keys([0x0D, 0x0A, 0x09, 0x7F, 0x08, 0x03]) == [.enter, .enter, .tab, .backspace, .backspace, .interrupt])
        #expect(keys([0x1B, 0x5B, 0x41, 0x1B, 0x5B, 0x42, 0x1B, 0x4F, 0x43, 0x1B, 0x5B, 0x44]) == [.up, .down, .right, .left])
    }

    @Test func multiByteCharactersArriveWhole() {
        #expect(keys(Array("Zoë".utf8)) == [.character("Z"), .character("o"), .character("ë")])
        #expect(keys(Array("日🥟".utf8)) == [.character("日"), .character("🥟")])
        #expect(keys([0xFF, 0x61]) == [.character("a")], "a byte that starts nothing is dropped")
    }

    @Test func otherSequencesAreReadToTheirEndAndIgnored() {
        // Home, Delete (ESC [ 3 ~), F5 (ESC [ 1 5 ~), Alt+x: none of them is escape, none types a character.
        #expect(keys([0x1B, 0x5B, 0x48, 0x1B, 0x5B, 0x33, 0x7E, 0x1B, 0x5B, 0x31, 0x35, 0x7E, 0x1B, 0x78]).isEmpty)
        #expect(keys([0x1B, 0x5B, 0x33, 0x7E] + Array("q".utf8)) == [.character("q")])
    }

    @Test func aLoneEscapeIsEscapeOnlyWhenNothingFollows() {
        #expect(keys([0x1B]).isEmpty, "it may start a sequence")
        #expect(keys([0x1B], flushingEscape: true) == [.escape])
        var decoder = KeyDecoder()
        _ = decoder.feed(0x1B)
        #expect(decoder.isAwaitingEscapeSequence)
        _ = decoder.feed(0x5B)
        #expect(!decoder.isAwaitingEscapeSequence)
        #expect(decoder.flushEscape() == nil)
        #expect(decoder.feed(0x41) == .up)
    }
}
