import DepotStore
import Foundation

extension FuzzTargets {
    /// A value as a screen might cache it: nested, optional, keyed by
    /// strings, with an enum's payloads, dates, links and bytes.
    struct StoredSample: Codable {
        enum Kind: Codable {
            case plain
            case tagged(String, count: Int)
        }
        var id: Int
        var title: String
        var when: Date
        var link: URL?
        var flags: [Bool?]
        var counts: [String: Int]
        var kinds: [Kind]
        var bytes: Data
        var children: [StoredSample]
    }

    /// `ValueFormat.decode` on a cached value's stored bytes (the marker is
    /// added: bytes without it are read as JSON, which `JSONDecoder` owns).
    ///
    /// Invariants: it returns or throws a `DecodingError`, nothing else, and
    /// never traps; a value it returns encodes, and that reads back and
    /// encodes again to as many bytes (dictionaries may change order).
    static func storedValue(_ data: Data) {
        let value: StoredSample
        do {
            value = try ValueFormat.decode(StoredSample.self, from: Data([ValueFormat.marker]) + data)
        } catch is DecodingError {
            return
        } catch {
            fail("stored-value", "threw \(type(of: error)), not a DecodingError: \(error)")
        }
        do {
            let stored = try ValueFormat.encode(value)
            let again = try ValueFormat.encode(ValueFormat.decode(StoredSample.self, from: stored))
            check(again.count == stored.count, "stored-value", "a value stored in \(stored.count) bytes stores again in \(again.count)")
        } catch {
            fail("stored-value", "a value it read does not store and read back: \(error)")
        }
    }
}
