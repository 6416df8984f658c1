/// The namespaces ``FeedReader`` understands.
enum FeedNamespace {
    static let rss090 = "http://my.netscape.com/rdf/simple/0.9/"
    static let rss10 = "http://purl.org/rss/1.0/"
    static let rss20 = "http://backend.userland.com/rss2"
    static let rdf = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
    static let atom10 = "http://www.w3.org/2005/Atom"
    static let atom03 = "http://purl.org/atom/ns#"
    static let dc = "http://purl.org/dc/elements/1.1/"
    static let dcterms = "http://purl.org/dc/terms/"
    static let content = "http://purl.org/rss/1.0/modules/content/"
    static let media = "http://search.yahoo.com/mrss/"
    static let itunes = "http://www.itunes.com/dtds/podcast-1.0.dtd"
    static let xml = "http://www.w3.org/XML/1998/namespace"

    /// Plain RSS elements: no namespace (0.91 to 2.0), or RSS 0.90's and 1.0's.
    static let rss: Set<String> = ["", rss090, rss10, rss20]
    static let atom: Set<String> = [atom10, atom03]

    /// The usual prefixes, for feeds that use one without declaring it.
    static let wellKnownPrefixes: [String: String] = [
        "dc": dc, "dcterms": dcterms, "content": content, "media": media, "atom": atom10, "rdf": rdf, "itunes": itunes,
    ]
}
