@testable import DepotStore
import Foundation
import Testing

/// The stored form of cached values: whatever a `Codable` conformance
/// writes comes back equal, as it does through JSON; values stored as JSON
/// by an earlier version still read; damaged bytes throw, never trap.
@Suite struct ValueFormatTests {
    struct Article: Codable, Equatable {
        var id: Int
        var title: String
        var publishedAt: Date
        var imageURL: URL?
        var isFeatured: Bool
    }

    struct Numbers: Codable, Equatable {
        var int8 = Int8.min, int16 = Int16.min, int32 = Int32.min, int64 = Int64.min, int = Int.max
        var uint8 = UInt8.max, uint16 = UInt16.max, uint32 = UInt32.max, uint64 = UInt64.max, uint = UInt.max
        var float: Float = 0.1, double = -0.0, big = 1.7976931348623157e308, tiny = Double.leastNonzeroMagnitude
    }

    enum Shape: Codable, Equatable {
        case circle(radius: Double)
        case polygon([Int], closed: Bool)
        case empty
    }

    enum Level: String, Codable { case low, high }

    /// Everything nested: optionals kept and left out, dictionaries with
    /// string, integer and other keys, large enough to be indexed.
    struct Everything: Codable, Equatable {
        var articles: [Article]
        var numbers = Numbers()
        var shapes: [Shape] = [.circle(radius: 2.5), .polygon([1, 2, 3], closed: true), .empty]
        var levels: [Level: Int] = [.low: 1, .high: 2]
        var optionals: [Int?] = [1, nil, 3, nil]
        var nested: [[String]] = [[], ["a"], ["", "é", "👩‍👩‍👧", "nul\u{0}inside"]]
        var byName: [String: Int] = Dictionary(uniqueKeysWithValues: (0..<40).map { ("key \($0)", $0) })
        var byNumber: [Int: String] = [7: "seven", -1: "minus one"]
        var byUUID: [UUID: Bool] = [UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!: true]
        var data = Data([0, 1, 2, 255])
        var empty = Data()
        var decimal = Decimal(string: "12345.6789")!
        var missing: String?
        var present: String? = "here"
        var nothing: [String: [Int]] = [:]
    }

    static let sample = Everything(articles: (0..<5).map {
        Article(id: $0, title: "Notes \($0)", publishedAt: Date(timeIntervalSince1970: 1_790_000_000 + Double($0) * 0.25),
                imageURL: $0 % 2 == 0 ? URL(string: "https://cdn.example.com/\($0).jpg?size=large#top") : nil, isFeatured: $0 == 3)
    })

    @Test func everythingComesBackEqual() throws {
        let stored = try ValueFormat.encode(Self.sample)
        #expect(stored.first == ValueFormat.marker)
        #expect(try ValueFormat.decode(Everything.self, from: stored) == Self.sample)
        // And equal to what JSON gives back.
        let json = try JSONDecoder().decode(Everything.self, from: JSONEncoder().encode(Self.sample))
        #expect(try ValueFormat.decode(Everything.self, from: stored) == json)
    }

    @Test func valuesAtTheTopLevel() throws {
        func roundTrip<T: Codable & Equatable>(_ value: T) throws -> T { try ValueFormat.decode(T.self, from: ValueFormat.encode(value)) }
        #expect(try roundTrip(42) == 42)
        #expect(try roundTrip("text") == "text")
        #expect(try roundTrip(Optional<Int>.none) == nil)
        #expect(try roundTrip(Optional(7)) == 7)
        #expect(try roundTrip(Date(timeIntervalSinceReferenceDate: 12.5)) == Date(timeIntervalSinceReferenceDate: 12.5))
        #expect(try roundTrip(URL(string: "https://example.com/a%20b?q=1#f")!).absoluteString == "https://example.com/a%20b?q=1#f")
        #expect(try roundTrip([Int?.none, 2, nil]) == [nil, 2, nil])
        #expect(try roundTrip(Data("bytes".utf8)) == Data("bytes".utf8))
        #expect(try roundTrip([Article]()) == [])
        #expect(try roundTrip(Shape.polygon([], closed: false)) == .polygon([], closed: false))
        #expect(try roundTrip(Double.infinity) == .infinity)
    }

    /// A class and its subclass, through `superEncoder` and `superDecoder`,
    /// keyed and unkeyed; and a nested container filled after a later key.
    @Test func superEncodersAndLateNestedContainers() throws {
        class Base: Codable {
            var name: String
            init(name: String) { self.name = name }
        }
        final class Derived: Base {
            var extra: [Int]
            init(name: String, extra: [Int]) {
                self.extra = extra
                super.init(name: name)
            }
            enum CodingKeys: String, CodingKey { case extra, parent }
            required init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                extra = try container.decode([Int].self, forKey: .extra)
                try super.init(from: container.superDecoder(forKey: .parent))
            }
            override func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                let parent = container.superEncoder(forKey: .parent)
                try container.encode(extra, forKey: .extra)
                // Filled after a later key was written.
                try super.encode(to: parent)
            }
        }
        struct Late: Codable, Equatable {
            var first: Int, inner: Int, last: Int
            enum CodingKeys: String, CodingKey { case first, nested, last }
            enum Inner: String, CodingKey { case inner }
            init(first: Int, inner: Int, last: Int) { (self.first, self.inner, self.last) = (first, inner, last) }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                last = try container.decode(Int.self, forKey: .last)
                inner = try container.nestedContainer(keyedBy: Inner.self, forKey: .nested).decode(Int.self, forKey: .inner)
                first = try container.decode(Int.self, forKey: .first)
            }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(first, forKey: .first)
                var nested = container.nestedContainer(keyedBy: Inner.self, forKey: .nested)
                try container.encode(last, forKey: .last)
                try nested.encode(inner, forKey: .inner)
            }
        }
        /// `superEncoder()` and `superDecoder()` without a key of the type's own.
        final class Plain: Base {
            var flag = true
            enum CodingKeys: String, CodingKey { case flag }
            override init(name: String) { super.init(name: name) }
            required init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                flag = try container.decode(Bool.self, forKey: .flag)
                try super.init(from: container.superDecoder())
            }
            override func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(flag, forKey: .flag)
                try super.encode(to: container.superEncoder())
            }
        }
        #expect(try ValueFormat.decode(Plain.self, from: ValueFormat.encode(Plain(name: "plain"))).name == "plain")
        let derived = try ValueFormat.decode(Derived.self, from: ValueFormat.encode(Derived(name: "base's", extra: [1, 2])))
        #expect(derived.name == "base's" && derived.extra == [1, 2])
        #expect(try ValueFormat.decode([Late].self, from: ValueFormat.encode([Late(first: 1, inner: 2, last: 3)])) == [Late(first: 1, inner: 2, last: 3)])
    }

    /// Patterns JSON allows that a stream reader can get wrong: a subclass
    /// handing its own decoder to its superclass (a second container on the
    /// same item), a read tried again after a failed one, and a lossy array
    /// that skips an element it cannot read.
    @Test func secondContainersRetriesAndSkippedElements() throws {
        class Base: Codable {
            var id: Int
            init(id: Int) { self.id = id }
        }
        final class Sub: Base {
            var name: String
            enum CodingKeys: String, CodingKey { case name }
            init(id: Int, name: String) {
                self.name = name
                super.init(id: id)
            }
            required init(from decoder: any Decoder) throws {
                name = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .name)
                try super.init(from: decoder)
            }
            override func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(name, forKey: .name)
                try super.encode(to: encoder)
            }
        }
        let subs = try ValueFormat.decode([Sub].self, from: ValueFormat.encode([Sub(id: 1, name: "a"), Sub(id: 2, name: "b")]))
        #expect(subs.map(\.id) == [1, 2] && subs.map(\.name) == ["a", "b"])

        enum IntOrString: Codable, Equatable {
            case int(Int), string(String)
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let int = try? container.decode(Int.self) { self = .int(int) } else { self = .string(try container.decode(String.self)) }
            }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.singleValueContainer()
                switch self {
                case .int(let int): try container.encode(int)
                case .string(let string): try container.encode(string)
                }
            }
        }
        let mixed: [IntOrString] = [.int(1), .string("ab"), .int(3)]
        #expect(try ValueFormat.decode([IntOrString].self, from: ValueFormat.encode(mixed)) == mixed)

        struct Skip: Decodable {}
        struct Lossy: Decodable {
            var values: [Int] = []
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                while !container.isAtEnd {
                    if let value = try? container.decode(Int.self) { values.append(value) } else { _ = try container.decode(Skip.self) }
                }
            }
        }
        let stored = try ValueFormat.encode([IntOrString.int(1), .string("not a number"), .int(3), .string("x")])
        #expect(try ValueFormat.decode(Lossy.self, from: stored).values == [1, 3])
    }

    /// Stored bytes that would make a reader recurse without end, or reserve
    /// room for billions of elements, throw first.
    @Test func recursionAndCountsFromDamagedBytesThrow() throws {
        indirect enum Tree: Decodable {
            case node([Tree])
            init(from decoder: any Decoder) throws { self = .node(try decoder.singleValueContainer().decode([Tree].self)) }
        }
        var deep: [UInt8] = [ValueFormat.marker]
        for _ in 0..<100_000 { deep += [ValueFormat.Tag.array.rawValue, 1, 0, 0, 0] }
        deep.append(ValueFormat.Tag.array.rawValue)
        deep += [0, 0, 0, 0]
        #expect(throws: DecodingError.self) { try ValueFormat.decode(Tree.self, from: Data(deep)) }

        struct Reserving: Decodable {
            var values: [Int] = []
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                values.reserveCapacity(container.count ?? 0)
                while !container.isAtEnd { values.append(try container.decode(Int.self)) }
            }
        }
        let huge = Data([ValueFormat.marker, ValueFormat.Tag.array.rawValue, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: DecodingError.self) { try ValueFormat.decode(Reserving.self, from: huge) }
        let hugeObject = Data([ValueFormat.marker, ValueFormat.Tag.object.rawValue, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: DecodingError.self) { try ValueFormat.decode([String: Int].self, from: hugeObject) }
        // A stored Double that no Float holds throws, as from JSON.
        #expect(throws: DecodingError.self) { try ValueFormat.decode(Float.self, from: ValueFormat.encode(1e300)) }
    }

    /// Values an earlier version stored as JSON read as before.
    @Test func valuesStoredAsJSONStillRead() throws {
        let json = try JSONEncoder().encode(Self.sample)
        #expect(try ValueFormat.decode(Everything.self, from: json) == Self.sample)
        #expect(try ValueFormat.decode(Int.self, from: Data("  42".utf8)) == 42)
    }

    /// A type that changed between app versions converts where JSON would
    /// (a whole number as a `Double`, and back), and throws where JSON would.
    @Test func aChangedTypeDecodesOrThrowsAsFromJSON() throws {
        struct V1: Codable { var count: Int; var label: String }
        struct AsDouble: Codable { var count: Double; var label: String }
        struct AsInt8: Codable { var count: Int8 }
        struct NewField: Codable { var count: Int; var label: String; var added: Bool }
        struct Retyped: Codable { var count: Int; var label: Int }
        let stored = try ValueFormat.encode(V1(count: 300, label: "x"))
        #expect(try ValueFormat.decode(AsDouble.self, from: stored).count == 300)
        #expect(try ValueFormat.decode(V1.self, from: ValueFormat.encode(AsDouble(count: 2, label: "y"))).count == 2)
        #expect(throws: DecodingError.self) { try ValueFormat.decode(V1.self, from: ValueFormat.encode(AsDouble(count: 2.5, label: "y"))) }
        #expect(throws: DecodingError.self) { try ValueFormat.decode(AsInt8.self, from: stored) }
        #expect(throws: DecodingError.self) { try ValueFormat.decode(NewField.self, from: stored) }
        #expect(throws: DecodingError.self) { try ValueFormat.decode(Retyped.self, from: stored) }
    }

    /// Every cut of a stored value throws; so does every single byte
    /// changed to a tag it cannot be, and nothing traps.
    @Test func damagedBytesThrowAndNeverTrap() throws {
        let stored = try ValueFormat.encode(Array(Self.sample.articles.prefix(2)))
        for length in 1..<stored.count {
            #expect(throws: (any Error).self, "cut to \(length) bytes") { try ValueFormat.decode([Article].self, from: stored.prefix(length)) }
        }
        // Any byte, anywhere: a throw or some value (a changed letter is
        // still a string), never a trap.
        for index in 1..<stored.count {
            for byte: UInt8 in [0, 4, 5, 9, 0x7F, 0xFF] {
                var damaged = stored
                damaged[index] = byte
                _ = try? ValueFormat.decode([Article].self, from: damaged)
            }
        }
        // A tag no item has, where the value's first item starts.
        for byte in UInt8(10)...UInt8(255) where byte != ValueFormat.marker {
            var damaged = stored
            damaged[1] = byte
            #expect(throws: DecodingError.self) { try ValueFormat.decode([Article].self, from: damaged) }
        }
    }

    /// Stored arrays nested far deeper than any value throw instead of
    /// overflowing the stack while an object's entries are stepped over.
    @Test func hostileNestingThrows() throws {
        struct Holder: Decodable { var value: Int }
        var bytes: [UInt8] = [ValueFormat.marker, ValueFormat.Tag.object.rawValue, 1, 0, 0, 0, 5, 0, 0, 0]
        bytes += Array("deep!".utf8)
        for _ in 0..<100_000 { bytes += [ValueFormat.Tag.array.rawValue, 1, 0, 0, 0] }
        bytes.append(ValueFormat.Tag.null.rawValue)
        #expect(throws: DecodingError.self) { try ValueFormat.decode(Holder.self, from: Data(bytes)) }
    }
}
