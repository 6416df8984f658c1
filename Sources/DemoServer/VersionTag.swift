/// A record's version as an HTTP entity tag, and the `If-Match` /
/// `If-None-Match` lists that name one: what lets a client edit only the
/// version it has seen.
///
/// The tag is strong, the version in quotes: version 3 is `"3"`.
///
/// For example:
///
/// ```swift
/// VersionTag.string(3)                                         // "\"3\""
/// VersionTag.list(["\"2\", \"3\""], names: 3, weakly: false)    // true
/// VersionTag.list(["W/\"3\""], names: 3, weakly: false)         // false: If-Match compares strongly
/// VersionTag.list(["*"], names: 3, weakly: false)               // true: any version
/// ```
enum VersionTag {
    /// The entity tag of `version`, quotes included.
    static func string(_ version: Int) -> String { "\"\(version)\"" }

    /// Whether the field values of an `If-Match` (`weakly: false`) or
    /// `If-None-Match` (`weakly: true`) list name `version`.
    ///
    /// - Parameters:
    ///   - values: the header's field values; each may hold several tags, comma-separated.
    ///   - version: the record's version now.
    ///   - weakly: whether a weak tag (`W/"3"`) may match, as for `If-None-Match`;
    ///     `If-Match` compares strongly, so a weak tag never matches there.
    static func list(_ values: [String], names version: Int, weakly: Bool) -> Bool {
        let wanted = string(version)
        for value in values {
            for raw in value.split(separator: ",") {
                let tag = raw.trimmingCharacters(in: .whitespaces)
                if tag == "*" || tag == wanted { return true }
                if weakly, tag.hasPrefix("W/"), tag.dropFirst(2) == wanted { return true }
            }
        }
        return false
    }
}
