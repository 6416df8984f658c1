import Foundation
import Testing
@testable import NerdfeedKit

/// The fast path of link resolution agrees with `URL(string:relativeTo:)` on
/// every link it accepts, and leaves the rest to it.
@Suite struct LinkResolverTests {
    static let bases = [
        "https://forums.example.com/feeds/rss.xml",
        "http://example.com:8080/a/b/",
        "https://user@example.com/x",
        "http://127.0.0.1:61234/forum/rss?limit=5",
    ]

    static let links = [
        "/forum/posts/1", "/a?b=c&d=e#f", "/i/999999", "/%41", "/a/./b", "/a/../b", "/a/..", "/.", "//other.example/x",
        "https://Example.COM/Path?Q=1", "http://example.com", "https://a.example/b/../c", "https://user:pw@a.example/",
        "posts/1", "./posts", "?q=1", "#top", "mailto:a@example.com", "/with space", " /padded ", "/ünïcode", "",
        "/a:b@c!$&'()*+,;=-._~", "https:/missing-slash", "https://", "/trailing/", "/a/b.",
        // A port that is not one (the feed fuzzer's find): URL refuses it.
        "https://example.mailto:co&quot;a?a=1&b=2", "http://a.example:8080/x", "http://a.example:/x", "https://a_b.example/",
    ]

    @Test(arguments: bases)
    func theFastPathAgreesWithURLResolution(_ base: String) throws {
        let baseURL = try #require(URL(string: base))
        var cache: (base: URL, origin: String)?
        var accepted = 0
        for link in Self.links {
            guard let fast = LinkResolver.fastPath(link, against: baseURL, origin: &cache) else { continue }
            accepted += 1
            let slow = URL(string: link, relativeTo: baseURL)?.absoluteURL.absoluteString
            #expect(fast == slow, "\(link) against \(base)")
        }
        #expect(accepted >= 5, "the fast path takes the common shapes")
    }

    @Test func dotSegmentsSpacesAndPercentsGoTheSlowWay() throws {
        let base = try #require(URL(string: "https://example.com/a/"))
        var cache: (base: URL, origin: String)?
        for link in ["/a/./b", "/a/../b", "/a/..", "/with space", " /padded", "/%41", "posts/1", "//other.example/x", "https://u@h/",
                     "https://example.mailto:co&quot;a?a=1&b=2", "https://h:x/", "https://h&a/"] {
            #expect(LinkResolver.fastPath(link, against: base, origin: &cache) == nil, "\(link)")
        }
    }
}
