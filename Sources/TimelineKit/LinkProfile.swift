import Foundation

/// A network link to simulate: the `--link` profiles of the `timeline` CLI.
///
/// The named profiles follow the classes of Facebook's network-connection-class:
/// `edge` is below 150 kbit/s (poor), `3g` between 550 kbit/s and 2 Mbit/s (good).
///
/// For example:
///
/// ```swift
/// let link = try LinkProfile("edge")          // 120 kbit/s, 400 ms
/// let custom = try LinkProfile("300,250")     // 300 kbit/s, 250 ms
/// ```
public struct LinkProfile: Sendable, Hashable, CustomStringConvertible {
    /// The bandwidth in kilobits per second; `nil` for no limit.
    public var kbps: Int?
    /// The round-trip time added by the link, in milliseconds.
    public var rttMs: Int
    /// Whether the link is down.
    public var isOffline: Bool

    /// Makes a link.
    public init(kbps: Int?, rttMs: Int, isOffline: Bool = false) {
        self.kbps = kbps
        self.rttMs = rttMs
        self.isOffline = isOffline
    }

    /// No shaping at all: loopback speed.
    public static let fast = LinkProfile(kbps: nil, rttMs: 0)
    /// A good 3G link: 1 Mbit/s, 150 ms.
    public static let threeG = LinkProfile(kbps: 1_000, rttMs: 150)
    /// An EDGE link: 120 kbit/s, 400 ms.
    public static let edge = LinkProfile(kbps: 120, rttMs: 400)
    /// No link.
    public static let offline = LinkProfile(kbps: nil, rttMs: 0, isOffline: true)

    /// The named profiles, by name.
    public static let named: [(name: String, profile: LinkProfile)] = [("fast", .fast), ("3g", .threeG), ("edge", .edge), ("offline", .offline)]

    /// The bandwidths a custom link may have: 1 kbit/s to 10 Gbit/s.
    public static let kbpsRange = 1...10_000_000
    /// The round trips a custom link may have: none to one minute.
    public static let rttRange = 0...60_000

    /// Parses `fast`, `3g`, `edge`, `offline`, or `KBPS,RTTMS` (such as `300,250`,
    /// within ``kbpsRange`` and ``rttRange``).
    ///
    /// - Throws: ``LinkProfileError`` for anything else, with the accepted forms in its message.
    public init(_ text: String) throws(LinkProfileError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if let named = Self.named.first(where: { $0.name == trimmed }) {
            self = named.profile
            return
        }
        let parts = trimmed.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let kbps = Int(parts[0]), let rtt = Int(parts[1]),
              Self.kbpsRange.contains(kbps), Self.rttRange.contains(rtt) else {
            throw LinkProfileError(text: text)
        }
        self.init(kbps: kbps, rttMs: rtt)
    }

    /// The profile's name, or its numbers.
    public var description: String {
        if isOffline { return "offline" }
        if let name = Self.named.first(where: { $0.profile == self })?.name { return name }
        return "\(kbps.map { "\($0) kbit/s" } ?? "unlimited"), \(rttMs) ms"
    }
}

/// A `--link` value that is not a profile.
public struct LinkProfileError: Error, CustomStringConvertible {
    /// What was given.
    public var text: String

    /// What was wrong, and the forms that are accepted.
    public var description: String {
        "unknown link \"\(text)\": use fast, 3g, edge, offline, or KBPS,RTTMS such as 300,250 (1 to 10000000 kbit/s, 0 to 60000 ms)"
    }
}
