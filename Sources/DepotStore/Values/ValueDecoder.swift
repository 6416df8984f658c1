import Foundation

/// Decodes ``ValueFormat``'s items. Every read is bounds-checked: bytes
/// from a damaged file throw `DecodingError.dataCorrupted`, never trap.
/// Numbers convert as `JSONDecoder` converts them (an integer where a
/// `Double` is asked for, a whole `Double` where an `Int` is), so a value
/// whose field type changed between app versions decodes as it did from JSON.
final class ValueDecoder: Decoder {
    typealias Tag = ValueFormat.Tag

    let bytes: [UInt8]
    /// Where the next read starts.
    var position = 0
    /// Where the item being decoded starts: every container, and every
    /// read of a single value, starts there, so that a type may ask for a
    /// second container (a class handing its decoder to its superclass), or
    /// read again after a failed read (an "Int or String" value).
    var itemStart = 0
    /// How many items deep the decoding is: recursive types stop at
    /// ``ValueFormat/maximumDepth`` instead of overflowing the stack.
    var depth = 0
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(bytes: [UInt8], depth: Int = 0) {
        self.bytes = bytes
        self.depth = depth
    }

    /// A decoder of its own for the item at the position (a super decoder):
    /// reading it later does not move this one.
    func detachedItem() throws -> ValueDecoder {
        let start = position
        try skip(depth: 1)
        return ValueDecoder(bytes: Array(bytes[start..<position]), depth: depth + 1)
    }

    // MARK: Reading

    func corrupted(_ why: String) -> DecodingError {
        DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "the stored value is damaged: \(why)"))
    }

    func mismatch(_ type: Any.Type, _ tag: Tag) -> DecodingError {
        DecodingError.typeMismatch(type, .init(codingPath: [], debugDescription: "expected \(type), found a stored \(tag)"))
    }

    func readTag() throws -> Tag {
        guard position < bytes.count else { throw corrupted("it ends early") }
        guard let tag = Tag(rawValue: bytes[position]) else { throw corrupted("unknown tag \(bytes[position])") }
        position += 1
        return tag
    }

    /// `count` bytes from the position on, checked.
    private func take(_ count: Int) throws -> Range<Int> {
        guard count >= 0, count <= bytes.count - position else { throw corrupted("it ends early") }
        defer { position += count }
        return position..<(position + count)
    }

    func readLength() throws -> Int {
        let range = try take(4)
        return Int(bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: range.lowerBound, as: UInt32.self)) })
    }

    func readWord() throws -> UInt64 {
        let range = try take(8)
        return bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: range.lowerBound, as: UInt64.self)) }
    }

    /// A string's length and UTF-8 (its tag already read).
    func readStringBody() throws -> String {
        let range = try take(try readLength())
        let string = bytes.withUnsafeBufferPointer { String(validating: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
        guard let string else { throw corrupted("a string is not UTF-8") }
        return string
    }

    /// The range of a key's UTF-8 (an object's key, without a tag).
    func readKey() throws -> Range<Int> {
        try take(try readLength())
    }

    /// Steps over one item, its nested items too.
    func skip(depth: Int = 0) throws {
        guard depth < ValueFormat.maximumDepth else { throw corrupted("nested too deep") }
        switch try readTag() {
        case .null, .false, .true: break
        case .int, .uint, .double: _ = try take(8)
        case .string, .data: _ = try take(try readLength())
        case .array:
            for _ in 0..<(try readLength()) { try skip(depth: depth + 1) }
        case .object:
            for _ in 0..<(try readLength()) {
                _ = try readKey()
                try skip(depth: depth + 1)
            }
        }
    }

    /// Back at the start of the item being decoded, for a single value's read.
    func atItem() -> ValueDecoder {
        position = itemStart
        return self
    }

    var nextIsNil: Bool { position < bytes.count && bytes[position] == Tag.null.rawValue }

    // MARK: Values

    func decodeItem<Value: Decodable>(_ type: Value.Type) throws -> Value {
        guard depth < ValueFormat.maximumDepth else { throw corrupted("nested too deep") }
        let outer = itemStart
        itemStart = position
        depth += 1
        defer {
            itemStart = outer
            depth -= 1
        }
        if Value.self == Date.self { return Date(timeIntervalSinceReferenceDate: try decodeFloat(Double.self)) as! Value }
        if Value.self == Data.self {
            let tag = try readTag()
            guard tag == .data else { throw mismatch(Data.self, tag) }
            return Data(bytes[try take(try readLength())]) as! Value
        }
        if Value.self == URL.self {
            guard let url = URL(string: try decodeString()) else { throw corrupted("a URL does not parse") }
            return url as! Value
        }
        return try Value(from: self)
    }

    func decodeBool() throws -> Bool {
        switch try readTag() {
        case .false: return false
        case .true: return true
        case let tag: throw mismatch(Bool.self, tag)
        }
    }

    func decodeString() throws -> String {
        let tag = try readTag()
        guard tag == .string else { throw mismatch(String.self, tag) }
        return try readStringBody()
    }

    func decodeInteger<Integer: FixedWidthInteger>(_ type: Integer.Type) throws -> Integer {
        let tag = try readTag()
        let value: Integer?
        switch tag {
        case .int: value = Integer(exactly: Int64(bitPattern: try readWord()))
        case .uint: value = Integer(exactly: try readWord())
        case .double: value = Integer(exactly: Double(bitPattern: try readWord()))
        default: throw mismatch(Integer.self, tag)
        }
        guard let value else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "the stored number does not fit in \(Integer.self)"))
        }
        return value
    }

    func decodeFloat<Float: BinaryFloatingPoint>(_ type: Float.Type) throws -> Float {
        let tag = try readTag()
        let stored: Double
        switch tag {
        case .double: stored = Double(bitPattern: try readWord())
        case .int: return Float(Int64(bitPattern: try readWord()))
        case .uint: return Float(try readWord())
        default: throw mismatch(Float.self, tag)
        }
        let value = Float(stored)
        guard value.isFinite || !stored.isFinite else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "the stored number does not fit in \(Float.self)"))
        }
        return value
    }

    // MARK: Containers

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        position = itemStart
        return KeyedDecodingContainer(try Keyed<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        position = itemStart
        return try Unkeyed(decoder: self)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        Single(decoder: self)
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: ValueDecoder
        /// Each entry's key (its UTF-8's range) and where its item starts.
        let entries: [(key: Range<Int>, item: Int)]
        /// Where the object ends: the decoder is left there after each read.
        let end: Int
        /// Keys to items, for objects too large to search: the last of a repeated key.
        let index: [String: Int]?
        var codingPath: [any CodingKey] { [] }

        init(decoder: ValueDecoder) throws {
            self.decoder = decoder
            let tag = try decoder.readTag()
            guard tag == .object else { throw decoder.mismatch([String: Any].self, tag) }
            let count = try decoder.readLength()
            // Each entry takes at least five bytes: a count the bytes cannot hold is damage.
            guard count <= (decoder.bytes.count - decoder.position) / 5 else { throw decoder.corrupted("an object counts more entries than its bytes hold") }
            var entries: [(key: Range<Int>, item: Int)] = []
            for _ in 0..<count {
                let key = try decoder.readKey()
                entries.append((key, decoder.position))
                try decoder.skip(depth: 1)
            }
            self.entries = entries
            end = decoder.position
            if count > 16 {
                var index: [String: Int] = [:]
                for entry in entries {
                    index[String(decoding: decoder.bytes[entry.key], as: UTF8.self)] = entry.item
                }
                self.index = index
            } else {
                index = nil
            }
        }

        /// Where the item named `name` starts, if the object has it.
        private func item(_ name: String) -> Int? {
            if let index { return index[name] }
            var name = name
            return name.withUTF8 { name in
                decoder.bytes.withUnsafeBufferPointer { bytes in
                    entries.last { entry in
                        entry.key.count == name.count && (name.isEmpty || memcmp(bytes.baseAddress! + entry.key.lowerBound, name.baseAddress!, name.count) == 0)
                    }?.item
                }
            }
        }

        /// Decodes `key`'s item with `read`, then leaves the decoder at the object's end.
        private func read<T>(_ key: some CodingKey, _ read: () throws -> T) throws -> T {
            guard let item = item(key.stringValue) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: [], debugDescription: "no stored value for \(key.stringValue)"))
            }
            decoder.position = item
            defer { decoder.position = end }
            return try read()
        }

        var allKeys: [Key] {
            entries.compactMap { Key(stringValue: String(decoding: decoder.bytes[$0.key], as: UTF8.self)) }
        }

        func contains(_ key: Key) -> Bool { item(key.stringValue) != nil }
        func decodeNil(forKey key: Key) throws -> Bool { try read(key) { decoder.nextIsNil } }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try read(key, decoder.decodeBool) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try read(key, decoder.decodeString) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try read(key) { try decoder.decodeFloat(type) } }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try read(key) { try decoder.decodeFloat(type) } }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try read(key) { try decoder.decodeInteger(type) } }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try read(key) { try decoder.decodeInteger(type) } }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try read(key) { try decoder.decodeItem(type) } }

        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            guard contains(key) else { return nil }
            return try read(key) { decoder.nextIsNil ? nil : try decoder.decodeItem(type) }
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try read(key) { KeyedDecodingContainer(try Keyed<NestedKey>(decoder: decoder)) }
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try read(key) { try Unkeyed(decoder: decoder) }
        }

        func superDecoder() throws -> any Decoder { try superDecoder(under: ValueEncoder.SuperKey()) }
        func superDecoder(forKey key: Key) throws -> any Decoder { try superDecoder(under: key) }

        private func superDecoder(under key: some CodingKey) throws -> any Decoder {
            try read(key) { try decoder.detachedItem() }
        }
    }

    struct Unkeyed: UnkeyedDecodingContainer {
        let decoder: ValueDecoder
        let count: Int?
        var currentIndex = 0
        /// Where the next element starts.
        var position: Int
        var codingPath: [any CodingKey] { [] }
        var isAtEnd: Bool { currentIndex >= count! }

        init(decoder: ValueDecoder) throws {
            self.decoder = decoder
            let tag = try decoder.readTag()
            guard tag == .array else { throw decoder.mismatch([Any].self, tag) }
            let count = try decoder.readLength()
            // Each element takes at least a byte: a count the bytes cannot
            // hold is damage, not a capacity to reserve.
            guard count <= decoder.bytes.count - decoder.position else { throw decoder.corrupted("an array counts more elements than its bytes hold") }
            self.count = count
            position = decoder.position
        }

        /// Decodes the next element with `read`. The element's end is found
        /// first, so that the next one starts there however much of it
        /// `read` took: a failed read, or a type that reads less than was
        /// stored (a lossy array skipping an element), moves on by one element.
        private mutating func next<T>(_ read: (ValueDecoder) throws -> T) throws -> T {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(T.self, .init(codingPath: [], debugDescription: "no stored element \(currentIndex)"))
            }
            decoder.position = position
            try decoder.skip(depth: 1)
            let end = decoder.position
            decoder.position = position
            defer { decoder.position = end }
            let value = try read(decoder)
            position = end
            currentIndex += 1
            return value
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else { return false }
            decoder.position = position
            guard decoder.nextIsNil else { return false }
            position += 1
            currentIndex += 1
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try $0.decodeBool() } }
        mutating func decode(_ type: String.Type) throws -> String { try next { try $0.decodeString() } }
        mutating func decode(_ type: Double.Type) throws -> Double { try next { try $0.decodeFloat(type) } }
        mutating func decode(_ type: Float.Type) throws -> Float { try next { try $0.decodeFloat(type) } }
        mutating func decode(_ type: Int.Type) throws -> Int { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try $0.decodeInteger(type) } }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try $0.decodeInteger(type) } }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next { try $0.decodeItem(type) } }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try next { KeyedDecodingContainer(try Keyed<NestedKey>(decoder: $0)) }
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try next { try Unkeyed(decoder: $0) }
        }

        mutating func superDecoder() throws -> any Decoder {
            try next { try $0.detachedItem() }
        }
    }

    struct Single: SingleValueDecodingContainer {
        let decoder: ValueDecoder
        var codingPath: [any CodingKey] { [] }

        /// Steps over the `nil` it finds: `Optional`'s `init(from:)` reads
        /// nothing more, and the next element starts after it.
        func decodeNil() -> Bool {
            decoder.position = decoder.itemStart
            guard decoder.nextIsNil else { return false }
            decoder.position += 1
            return true
        }
        func decode(_ type: Bool.Type) throws -> Bool { try decoder.atItem().decodeBool() }
        func decode(_ type: String.Type) throws -> String { try decoder.atItem().decodeString() }
        func decode(_ type: Double.Type) throws -> Double { try decoder.atItem().decodeFloat(type) }
        func decode(_ type: Float.Type) throws -> Float { try decoder.atItem().decodeFloat(type) }
        func decode(_ type: Int.Type) throws -> Int { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.atItem().decodeInteger(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.atItem().decodeInteger(type) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.atItem().decodeItem(type) }
    }
}
