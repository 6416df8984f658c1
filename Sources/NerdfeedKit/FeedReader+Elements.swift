/// What ``FeedReader`` makes of an element by its namespace and name alone.
extension FeedReader {
    /// Whether an element is a feed's root: RSS's `rss`, RDF's `RDF` (RSS
    /// 0.90 and 1.0) or Atom's `feed`.
    static func isFeedRoot(namespace: String, name: String) -> Bool {
        (name == "rss" && FeedNamespace.rss.contains(namespace))
            || (name == "RDF" && namespace == FeedNamespace.rdf)
            || (name == "feed" && FeedNamespace.atom.contains(namespace))
    }

    /// Whether an element is an item: RSS's `item` or Atom's `entry`.
    static func isItem(namespace: String, name: String) -> Bool {
        (name == "item" && FeedNamespace.rss.contains(namespace)) || (name == "entry" && FeedNamespace.atom.contains(namespace))
    }

    /// Whether an element is a text field, whose child elements are markup
    /// (Atom 1.0's `type="xhtml"` div, an XML media type on `content`, Atom
    /// 0.3's `mode="xml"`, its default; tags an RSS feed wrote unescaped) and
    /// whose text is read with the tags as spaces (but for inline ones, see
    /// ``FeedText/isInline(_:)``), whatever its type says.
    static func holdsText(namespace ns: String, name: String) -> Bool {
        switch name {
        case "title":
            return FeedNamespace.rss.contains(ns) || FeedNamespace.atom.contains(ns)
                || ns == FeedNamespace.dc || ns == FeedNamespace.media || ns == FeedNamespace.itunes
        case "description":
            return FeedNamespace.rss.contains(ns) || ns == FeedNamespace.dc || ns == FeedNamespace.media
        case "summary", "subtitle":
            return FeedNamespace.atom.contains(ns) || ns == FeedNamespace.itunes
        case "content":
            return FeedNamespace.atom.contains(ns)
        case "encoded":
            return ns == FeedNamespace.content
        default:
            return false
        }
    }

    /// The namespace and local name of an element, also when the namespace was
    /// not declared (`dc:creator` with no `xmlns:dc` still means Dublin Core;
    /// libxml2 reports the missing declaration as an error all the same).
    static func resolve(_ name: XMLStream.Name) -> (namespace: String, name: String) {
        if !name.namespace.isEmpty { return (name.namespace, name.localName) }
        guard let prefix = name.prefix else { return ("", name.localName) }
        return (FeedNamespace.wellKnownPrefixes[prefix] ?? "undeclared:" + prefix, name.localName)
    }
}
