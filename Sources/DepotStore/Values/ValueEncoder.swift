import Foundation

/// Encodes a value into a tree of items, which ``ValueFormat/Writer`` writes
/// out. A tree, not a stream, because `Encoder` lets a value fill a nested
/// container after its siblings.
final class ValueEncoder: Encoder {
    indirect enum Node {
        case null
        case bool(Bool)
        case int(Int64)
        case uint(UInt64)
        case double(Double)
        case string(String)
        case data(Data)
        case array(ArrayBox)
        case object(ObjectBox)
        /// Filled later: a `superEncoder`'s value.
        case slot(Slot)
    }

    final class ArrayBox {
        var items: [Node] = []
    }

    /// A repeated key keeps both entries; the decoder reads the last, as
    /// `JSONEncoder` keeps the last.
    final class ObjectBox {
        var entries: [(String, Node)] = []
    }

    final class Slot {
        var node: Node?
    }

    let slot: Slot
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(slot: Slot = Slot()) {
        self.slot = slot
    }

    /// `value` as an item, with `Date`, `Data` and `URL` as the layout says.
    func box<Value: Encodable>(_ value: Value) throws -> Node {
        if Value.self == Date.self { return .double((value as! Date).timeIntervalSinceReferenceDate) }
        if Value.self == Data.self { return .data(value as! Data) }
        if Value.self == URL.self { return .string((value as! URL).absoluteString) }
        let encoder = ValueEncoder()
        try value.encode(to: encoder)
        return encoder.slot.node ?? .object(ObjectBox())
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object(let object) = slot.node { return KeyedEncodingContainer(Keyed(encoder: self, object: object)) }
        let object = ObjectBox()
        slot.node = .object(object)
        return KeyedEncodingContainer(Keyed(encoder: self, object: object))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array(let array) = slot.node { return Unkeyed(encoder: self, array: array) }
        let array = ArrayBox()
        slot.node = .array(array)
        return Unkeyed(encoder: self, array: array)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        Single(encoder: self)
    }

    /// The key a `superEncoder()` writes under, as with `JSONEncoder`.
    struct SuperKey: CodingKey {
        var stringValue: String { "super" }
        var intValue: Int? { nil }
        init() {}
        init?(stringValue: String) { nil }
        init?(intValue: Int) { nil }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let encoder: ValueEncoder
        let object: ObjectBox
        var codingPath: [any CodingKey] { [] }

        private func put(_ node: Node, _ key: some CodingKey) { object.entries.append((key.stringValue, node)) }

        mutating func encodeNil(forKey key: Key) { put(.null, key) }
        mutating func encode(_ value: Bool, forKey key: Key) { put(.bool(value), key) }
        mutating func encode(_ value: String, forKey key: Key) { put(.string(value), key) }
        mutating func encode(_ value: Double, forKey key: Key) { put(.double(value), key) }
        mutating func encode(_ value: Float, forKey key: Key) { put(.double(Double(value)), key) }
        mutating func encode(_ value: Int, forKey key: Key) { put(.int(Int64(value)), key) }
        mutating func encode(_ value: Int8, forKey key: Key) { put(.int(Int64(value)), key) }
        mutating func encode(_ value: Int16, forKey key: Key) { put(.int(Int64(value)), key) }
        mutating func encode(_ value: Int32, forKey key: Key) { put(.int(Int64(value)), key) }
        mutating func encode(_ value: Int64, forKey key: Key) { put(.int(value), key) }
        mutating func encode(_ value: UInt, forKey key: Key) { put(.uint(UInt64(value)), key) }
        mutating func encode(_ value: UInt8, forKey key: Key) { put(.uint(UInt64(value)), key) }
        mutating func encode(_ value: UInt16, forKey key: Key) { put(.uint(UInt64(value)), key) }
        mutating func encode(_ value: UInt32, forKey key: Key) { put(.uint(UInt64(value)), key) }
        mutating func encode(_ value: UInt64, forKey key: Key) { put(.uint(value), key) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { put(try encoder.box(value), key) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let nested = ObjectBox()
            put(.object(nested), key)
            return KeyedEncodingContainer(Keyed<NestedKey>(encoder: encoder, object: nested))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let nested = ArrayBox()
            put(.array(nested), key)
            return Unkeyed(encoder: encoder, array: nested)
        }

        mutating func superEncoder() -> any Encoder { superEncoder(under: SuperKey()) }
        mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(under: key) }

        private func superEncoder(under key: some CodingKey) -> any Encoder {
            let slot = Slot()
            put(.slot(slot), key)
            return ValueEncoder(slot: slot)
        }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let encoder: ValueEncoder
        let array: ArrayBox
        var codingPath: [any CodingKey] { [] }
        var count: Int { array.items.count }

        mutating func encodeNil() { array.items.append(.null) }
        mutating func encode(_ value: Bool) { array.items.append(.bool(value)) }
        mutating func encode(_ value: String) { array.items.append(.string(value)) }
        mutating func encode(_ value: Double) { array.items.append(.double(value)) }
        mutating func encode(_ value: Float) { array.items.append(.double(Double(value))) }
        mutating func encode(_ value: Int) { array.items.append(.int(Int64(value))) }
        mutating func encode(_ value: Int8) { array.items.append(.int(Int64(value))) }
        mutating func encode(_ value: Int16) { array.items.append(.int(Int64(value))) }
        mutating func encode(_ value: Int32) { array.items.append(.int(Int64(value))) }
        mutating func encode(_ value: Int64) { array.items.append(.int(value)) }
        mutating func encode(_ value: UInt) { array.items.append(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt8) { array.items.append(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt16) { array.items.append(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt32) { array.items.append(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt64) { array.items.append(.uint(value)) }
        mutating func encode<T: Encodable>(_ value: T) throws { array.items.append(try encoder.box(value)) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let nested = ObjectBox()
            array.items.append(.object(nested))
            return KeyedEncodingContainer(Keyed<NestedKey>(encoder: encoder, object: nested))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let nested = ArrayBox()
            array.items.append(.array(nested))
            return Unkeyed(encoder: encoder, array: nested)
        }

        mutating func superEncoder() -> any Encoder {
            let slot = Slot()
            array.items.append(.slot(slot))
            return ValueEncoder(slot: slot)
        }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: ValueEncoder
        var codingPath: [any CodingKey] { [] }

        private func put(_ node: Node) { encoder.slot.node = node }

        mutating func encodeNil() { put(.null) }
        mutating func encode(_ value: Bool) { put(.bool(value)) }
        mutating func encode(_ value: String) { put(.string(value)) }
        mutating func encode(_ value: Double) { put(.double(value)) }
        mutating func encode(_ value: Float) { put(.double(Double(value))) }
        mutating func encode(_ value: Int) { put(.int(Int64(value))) }
        mutating func encode(_ value: Int8) { put(.int(Int64(value))) }
        mutating func encode(_ value: Int16) { put(.int(Int64(value))) }
        mutating func encode(_ value: Int32) { put(.int(Int64(value))) }
        mutating func encode(_ value: Int64) { put(.int(value)) }
        mutating func encode(_ value: UInt) { put(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt8) { put(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt16) { put(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt32) { put(.uint(UInt64(value))) }
        mutating func encode(_ value: UInt64) { put(.uint(value)) }
        mutating func encode<T: Encodable>(_ value: T) throws { put(try encoder.box(value)) }
    }
}
