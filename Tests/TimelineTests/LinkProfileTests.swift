import Depot
import Testing
import TimelineKit

struct LinkProfileTests {
    @Test(arguments: [
        ("fast", LinkProfile.fast), ("3G", .threeG), (" edge ", .edge), ("offline", .offline),
        ("300,250", LinkProfile(kbps: 300, rttMs: 250)), ("64, 0", LinkProfile(kbps: 64, rttMs: 0)),
    ])
    func parses(_ text: String, _ expected: LinkProfile) throws {
        #expect(try LinkProfile(text) == expected)
    }

    @Test(arguments: ["", "lte", "300", "0,100", "-5,100", "300,-1", "300,250,1", "fast,3g", "99999999999999999,0", "300,99999999"])
    func rejects(_ text: String) {
        #expect(throws: LinkProfileError.self) { try LinkProfile(text) }
    }

    @Test func describesItself() {
        #expect(LinkProfile.edge.description == "edge")
        #expect(LinkProfile(kbps: 300, rttMs: 250).description == "300 kbit/s, 250 ms")
        #expect(LinkProfile.offline.description == "offline")
    }

    /// The named profiles sit in the qualities they are named after.
    @Test func edgeIsPoorAndThreeGIsGood() throws {
        let thresholds = ConnectionQuality.Thresholds.default
        #expect(thresholds.quality(forBandwidth: Double(try #require(LinkProfile.edge.kbps)) * 1000) == .poor)
        #expect(thresholds.quality(forBandwidth: Double(try #require(LinkProfile.threeG.kbps)) * 1000) == .good)
    }
}
