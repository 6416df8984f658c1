import Foundation
import Testing
@testable import Depot

/// Type names are what `String(describing:)` and `String(reflecting:)` print:
/// operation names appear in events, logs and the sync ledger, so they must
/// not change with how they are worked out.
@Suite struct TypeNamesTests {
    struct Box<Content> {
        struct Inner {}
    }

    final class Reference {}
    enum Kind { case one }
    private struct Hidden {}

    static let types: [Any.Type] = [
        Int.self, String.self, [String].self, [String: [Int]].self, Int?.self,
        Box<Int>.self, Box<[String]>.Inner.self, [Box<Kind>].self, Reference.self, Kind.self, Hidden.self,
        (Int, label: String).self, ((Int) -> String).self, (any Sendable).self, (any Hashable & Sendable).Type.self,
        URL.self, Date?.self,
    ]

    @Test func theNamesAreThoseStringDescribingAndReflectingPrint() {
        struct Local {}
        for type in Self.types + [Local.self, [Local].self] {
            let names = TypeNames.of(type)
            #expect(names.short == String(describing: type))
            #expect(names.qualified == String(reflecting: type))
        }
    }
}
