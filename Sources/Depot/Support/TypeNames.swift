import Synchronization

/// Type names, worked out once per type.
///
/// `String(describing:)` and `String(reflecting:)` on a type demangle its name
/// each time (about 0.7 µs each), and every request needs its operation's name
/// and its coalescing key.
enum TypeNames {
    struct Names: Sendable {
        /// `String(describing:)`: "FetchTopSongs".
        let short: String
        /// `String(reflecting:)`: "NerdfeedKit.FetchTopSongs".
        let qualified: String
    }

    private static let cache = Mutex<[ObjectIdentifier: Names]>([:])

    static func of(_ type: Any.Type) -> Names {
        let key = ObjectIdentifier(type)
        if let names = cache.withLock({ $0[key] }) { return names }
        // What `String(describing:)` and `String(reflecting:)` print for a
        // type, without their casts of the metatype to `CustomStringConvertible`
        // and the like, each a search of every conformance in the process
        // the first time (a cold start's first operation paid about 0.25 ms).
        let names = Names(short: _typeName(type, qualified: false), qualified: _typeName(type, qualified: true))
        cache.withLock { $0[key] = names }
        return names
    }
}
