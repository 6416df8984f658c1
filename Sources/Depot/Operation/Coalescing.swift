/// How an operation shares its transfer with identical operations.
public struct Coalescing: Sendable, Hashable {
    enum Base: Hashable, Sendable {
        case automatic
        case never
        case key(String)
    }

    let base: Base

    /// GET and HEAD coalesce by operation type, method and resolved URL; mutations never do.
    public static let automatic = Coalescing(base: .automatic)
    /// Never share this operation's transfer.
    public static let never = Coalescing(base: .never)
    /// Share with operations of the same type that give the same key.
    public static func key(_ key: String) -> Coalescing { Coalescing(base: .key(key)) }
}
