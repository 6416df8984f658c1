import Foundation

/// How ``ValueTable`` stores a value: a compact binary form of what the
/// value's `Codable` conformance writes, because decoding is most of a cold
/// start's first value, and `JSONDecoder` was most of that (`depot-bench
/// values`: 1,000 structs from a cold open, 1.35–1.40× a `JSONDecoder` of the
/// same JSON in a file; 1.94× when Depot stored JSON).
///
/// Layout: the marker byte ``marker`` (JSON never starts with it, so a value
/// stored as JSON by an earlier version still reads), then one item. An item
/// is a tag byte and its payload, little-endian:
///
/// | tag | item |
/// |---|---|
/// | 0 | nil |
/// | 1, 2 | false, true |
/// | 3 | a signed integer (8 bytes) |
/// | 4 | an unsigned integer (8 bytes) |
/// | 5 | a floating-point number (8 bytes) |
/// | 6 | a string (a 4-byte length, then UTF-8) |
/// | 7 | bytes (`Data`; a 4-byte length, then the bytes) |
/// | 8 | an array (a 4-byte count, then the items) |
/// | 9 | an object (a 4-byte count, then a key, as a string without its tag, and an item, each) |
///
/// `Date` is its seconds since 2001 (as `JSONEncoder` writes it by default),
/// `URL` its absolute string.
package enum ValueFormat {
    /// The first byte of a value in this form.
    package static let marker: UInt8 = 0xD5

    enum Tag: UInt8 {
        case null = 0, `false`, `true`, int, uint, double, string, data, array, object
    }

    /// Arrays and objects nested deeper than this in stored bytes are damage.
    static let maximumDepth = 512

    package static func encode<Value: Encodable>(_ value: Value) throws -> Data {
        let encoder = ValueEncoder()
        let root = try encoder.box(value)
        var writer = Writer()
        writer.bytes.append(marker)
        writer.write(root)
        return Data(writer.bytes)
    }

    package static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        guard data.first == marker else { return try JSONDecoder().decode(Value.self, from: data) }
        // Bytes left after the value are not checked for: a value may read
        // less than it stored (a `nil` is read without being stepped over).
        return try ValueDecoder(bytes: [UInt8](data.dropFirst())).decodeItem(Value.self)
    }

    /// Writes an encoded tree out.
    struct Writer {
        var bytes: [UInt8] = []

        mutating func length(_ count: Int) {
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: count).littleEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func string(_ string: String) {
            var string = string
            string.withUTF8 { utf8 in
                length(utf8.count)
                bytes.append(contentsOf: utf8)
            }
        }

        mutating func write(_ node: ValueEncoder.Node) {
            switch node {
            case .null: bytes.append(Tag.null.rawValue)
            case .bool(let value): bytes.append(value ? Tag.true.rawValue : Tag.false.rawValue)
            case .int(let value):
                bytes.append(Tag.int.rawValue)
                withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
            case .uint(let value):
                bytes.append(Tag.uint.rawValue)
                withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
            case .double(let value):
                bytes.append(Tag.double.rawValue)
                withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            case .string(let value):
                bytes.append(Tag.string.rawValue)
                string(value)
            case .data(let value):
                bytes.append(Tag.data.rawValue)
                length(value.count)
                bytes.append(contentsOf: value)
            case .array(let array):
                bytes.append(Tag.array.rawValue)
                length(array.items.count)
                for item in array.items { write(item) }
            case .object(let object):
                bytes.append(Tag.object.rawValue)
                length(object.entries.count)
                for (key, item) in object.entries {
                    string(key)
                    write(item)
                }
            case .slot(let slot):
                write(slot.node ?? .object(ValueEncoder.ObjectBox()))
            }
        }
    }
}
