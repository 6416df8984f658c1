import Depot
import Foundation
import GRDB

/// Decodes a large top-level JSON array in chunks on another thread while the
/// calling thread writes the chunks already decoded: parsing and writing overlap
/// on two cores, inside the caller's one transaction.
///
/// Use it from ``CachingOperation/write(_:to:)`` with the response as payload:
///
/// ```swift
/// func write(_ response: NetworkResponse, to db: Database) throws -> Int {
///     let insert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO song (id, title) VALUES (?, ?)")
///     return try JSONArrayIngest.decode(Song.self, from: response.body, into: db) { db, songs in
///         for song in songs {
///             insert.setUncheckedArguments([song.id, song.title])
///             try insert.execute()
///         }
///     }
/// }
/// ```
///
/// A malformed element anywhere fails the whole call with `.decoding`, and the
/// operation's transaction rolls back what the earlier chunks wrote.
public enum JSONArrayIngest {
    /// The default number of elements decoded at a time.
    public static let defaultChunkSize = 2048

    /// Decodes `data` (a JSON array of `Element`) chunk by chunk and hands each
    /// chunk to `write` on the calling thread, in order.
    ///
    /// - Parameters:
    ///   - type: The element type.
    ///   - data: A JSON array.
    ///   - chunkSize: Elements per chunk.
    ///   - decoder: Makes the decoder used for every chunk.
    ///   - db: The database, passed to `write`.
    ///   - write: Writes one chunk.
    /// - Returns: The number of elements.
    @discardableResult
    public static func decode<Element: Decodable & Sendable>(
        _ type: Element.Type,
        from data: Data,
        chunkSize: Int = defaultChunkSize,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() },
        into db: Database,
        _ write: (Database, [Element]) throws -> Void
    ) throws -> Int {
        let chunkSize = max(1, chunkSize)
        var count = 0
        try OverlappedIngest.run(
            produce: { yield in
                try JSONArraySplitter.forEachChunk(of: data, elements: chunkSize) { bytes in
                    try yield(decoder().decode([Element].self, from: bytes))
                }
            },
            consume: { chunk in
                try write(db, chunk)
                count += chunk.count
            }
        )
        return count
    }
}

/// Finds the elements of a top-level JSON array without decoding them.
enum JSONArraySplitter {
    /// Calls `body` with each run of `elements` consecutive elements, wrapped in
    /// `[` `]`, until the array ends or `body` throws. Throws `.decoding` when
    /// the data is not a well-formed array at the top level.
    static func forEachChunk(of data: Data, elements: Int, _ body: (Data) throws -> Void) throws {
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            let bytes = buffer.bindMemory(to: UInt8.self)
            var i = 0
            func skipSpace() {
                while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
            }
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "[") else {
                throw DepotError(.decoding, detail: "expected a JSON array")
            }
            i += 1
            var depth = 0
            var inString = false
            var escaped = false
            var chunkStart = i
            var inChunk = 0
            var sawValue = false
            var sawComma = false
            func emit(upTo end: Int) throws {
                var chunk = Data(capacity: end - chunkStart + 2)
                chunk.append(UInt8(ascii: "["))
                chunk.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[chunkStart..<end]))
                chunk.append(UInt8(ascii: "]"))
                try body(chunk)
            }
            while i < bytes.count {
                let byte = bytes[i]
                if inString {
                    if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                    i += 1
                    continue
                }
                switch byte {
                case UInt8(ascii: "\""):
                    inString = true
                    sawValue = true
                case UInt8(ascii: "["), UInt8(ascii: "{"):
                    depth += 1
                    sawValue = true
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    if depth == 0 {
                        guard byte == UInt8(ascii: "]") else { throw DepotError(.decoding, detail: "unbalanced JSON array") }
                        if sawValue {
                            try emit(upTo: i)
                        } else if sawComma {
                            throw DepotError(.decoding, detail: "a trailing comma in the JSON array")
                        }
                        i += 1
                        skipSpace()
                        guard i == bytes.count else { throw DepotError(.decoding, detail: "data after the JSON array") }
                        return
                    }
                    depth -= 1
                case UInt8(ascii: ","):
                    if depth == 0 {
                        guard sawValue else { throw DepotError(.decoding, detail: "an empty element in the JSON array") }
                        sawComma = true
                        inChunk += 1
                        if inChunk == elements {
                            try emit(upTo: i)
                            chunkStart = i + 1
                            inChunk = 0
                            sawValue = false
                        }
                    }
                case 0x20, 0x0A, 0x0D, 0x09:
                    break
                default:
                    sawValue = true
                }
                i += 1
            }
            throw DepotError(.decoding, detail: "the JSON array is truncated")
        }
    }
}
