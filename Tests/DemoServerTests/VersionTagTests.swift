@testable import DemoServer
import Testing

/// `If-Match` and `If-None-Match` lists against a contact's version, without a server.
@Suite struct VersionTagTests {
    @Test func ifMatchComparesStrongly() {
        #expect(VersionTag.string(3) == #""3""#)
        #expect(VersionTag.list([#""3""#], names: 3, weakly: false))
        #expect(VersionTag.list([#""1", "3""#], names: 3, weakly: false))
        #expect(VersionTag.list([#""1""#, #" "3" "#], names: 3, weakly: false))
        #expect(VersionTag.list(["*"], names: 3, weakly: false))
        #expect(!VersionTag.list([#"W/"3""#], names: 3, weakly: false))
        #expect(!VersionTag.list(["3"], names: 3, weakly: false), "an entity tag has its quotes")
        #expect(!VersionTag.list([#""33""#], names: 3, weakly: false))
    }

    @Test func ifNoneMatchComparesWeakly() {
        #expect(VersionTag.list([#"W/"3""#], names: 3, weakly: true))
        #expect(!VersionTag.list([#"W/"2""#], names: 3, weakly: true))
    }
}
