import Foundation

/// The identity of an entry that names none and has no link: a hash of its
/// title, date and summary, the same in every run and on every machine.
///
/// FNV-1a 64, written out here, rather than Swift's `Hasher` (seeded afresh in
/// every process, so its values cannot be stored) or SHA-256 (swift-crypto is
/// not a dependency of NerdfeedKit, and the identity needs no resistance to
/// chosen collisions: it only tells apart the entries of one feed, whose
/// publisher could give them ids anyway). 64 bits make a chance collision
/// between two entries of a feed of a million entries about 1 in 37 million.
///
/// For example:
///
/// ```swift
/// FeedIdentity.contentHash(title: "Service restored", published: nil, summary: nil)
/// // "hash:fnv1a64:…", 16 hex digits
/// ```
enum FeedIdentity {
    /// What every content hash starts with, so that it never reads as a link.
    static let prefix = "hash:fnv1a64:"

    /// The identity of an entry from what it shows: `hash:fnv1a64:` and 16
    /// lowercase hex digits.
    ///
    /// The hash covers a canonical text: a format version, then the title, the
    /// date as whole milliseconds since 1970 (empty without one) and the summary,
    /// separated by U+001F (which cleaned feed text never holds). The text is the
    /// cleaned one, so a feed that moves a title from CDATA to escaped markup
    /// keeps its entries; a change to how Nerdfeed cleans text would change them.
    ///
    /// - Parameters:
    ///   - title: The entry's title (``FeedParser`` passes it before removing breadcrumbs).
    ///   - published: Its date, if it has one.
    ///   - summary: Its summary as plain text, if it has one.
    static func contentHash(title: String, published: Date?, summary: String?) -> String {
        let separator = "\u{1F}"
        let milliseconds = published.map { String(Int64((($0.timeIntervalSince1970) * 1000).rounded())) } ?? ""
        let canonical = "1" + separator + title + separator + milliseconds + separator + (summary ?? "")
        let hex = String(fnv1a64(canonical.utf8), radix: 16)
        return prefix + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// FNV-1a 64 of `bytes` (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
    static func fnv1a64<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}
