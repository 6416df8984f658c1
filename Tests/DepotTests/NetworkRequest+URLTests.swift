@testable import Depot
import Foundation
import Testing

/// How a request's path joins the controller's base URL: a path always extends
/// the base, with or without a leading slash; a full URL replaces it.
@Suite struct NetworkRequestURLTests {
    private func url(_ request: NetworkRequest, base: String) throws -> String {
        try request.resolvedURL(baseURL: URL(string: base)!).absoluteString
    }

    @Test(arguments: ["https://host/api", "https://host/api/"])
    func aPathExtendsTheBaseWithOrWithoutItsTrailingSlash(base: String) throws {
        #expect(try url(.get("contacts"), base: base) == "https://host/api/contacts")
        #expect(try url(.get("contacts/7/comments"), base: base) == "https://host/api/contacts/7/comments")
    }

    @Test(arguments: ["https://host/api", "https://host/api/"])
    func aLeadingSlashStillExtendsTheBase(base: String) throws {
        #expect(try url(.get("/contacts"), base: base) == "https://host/api/contacts")
        #expect(try url(.get("//contacts"), base: base) == "https://host/api/contacts")
        #expect(try url(.get("/"), base: base) == "https://host/api/")
        #expect(try url(.get(""), base: base) == "https://host/api/")
    }

    @Test func aBaseWithoutAPathGetsTheRoot() throws {
        #expect(try url(.get("/x"), base: "http://h.test") == "http://h.test/x")
        #expect(try url(.get("x"), base: "http://h.test/") == "http://h.test/x")
    }

    @Test func aQueryInThePathIsKeptAndQueryItemsFollowIt() throws {
        #expect(try url(.get("/contacts?page=2"), base: "https://host/api") == "https://host/api/contacts?page=2")
        #expect(try url(.get("/timeline?since=5", query: ["limit": "20"]), base: "https://host/api") == "https://host/api/timeline?since=5&limit=20")
        #expect(try url(.get("/contacts", query: ["page": "2", "query": "Ann & Bob"]), base: "http://127.0.0.1:8080/api")
            == "http://127.0.0.1:8080/api/contacts?page=2&query=Ann+%26+Bob")
    }

    @Test func dotSegmentsResolveAsRFC3986Says() throws {
        #expect(try url(.get("v2/../contacts"), base: "https://host/api") == "https://host/api/contacts")
        #expect(try url(.get("./contacts"), base: "https://host/api") == "https://host/api/contacts")
        #expect(try url(.get("../status"), base: "https://host/api") == "https://host/status")
        #expect(try url(.get("/../status"), base: "https://host/api/") == "https://host/status")
        #expect(try url(.get("../../../status"), base: "https://host/api") == "https://host/status")
    }

    @Test func aFullURLReplacesTheBase() throws {
        #expect(try url(.get("https://other/x"), base: "https://host/api") == "https://other/x")
        #expect(try url(.get("http://other.test/x?y=1"), base: "https://host/api") == "http://other.test/x?y=1")
        #expect(try url(.get(URL(string: "file:///tmp/feed.xml")!), base: "https://host/api") == "file:///tmp/feed.xml")
        // A colon later in the path is not a scheme.
        #expect(try url(.get("a/b:c"), base: "http://127.0.0.1:8080/api") == "http://127.0.0.1:8080/api/a/b:c")
    }

    @Test func aRelativePathNeedsABaseURL() {
        #expect(throws: DepotError.self) { try NetworkRequest.get("/x").resolvedURL(baseURL: nil) }
    }

    @Test func schemeSeparatorsAreFoundByTheByteScan() {
        for (text, expected) in [("http://a", true), ("a://", true), ("::/:", false), (":/:/", false), ("/x:/y", false), ("://", true), ("", false), (":///", true)] {
            #expect(NetworkRequest.hasSchemeSeparator(text) == expected, "\(text)")
        }
    }

    /// The controller joins plain paths to its base by concatenation; that must
    /// give what RFC 3986 resolution (Foundation's) gives of the same path
    /// without its leading slashes, for every path.
    @Test func theBaseURLShortcutResolvesLikeFoundation() throws {
        let bases = [
            "http://127.0.0.1:8080", "http://127.0.0.1:8080/api", "http://h.test/api/v2/", "https://user@h.test:8443/a/b",
            "http://h.test/v1/../v2/", "http://h.test/api/.", "http://h.test/a%20b/", "HTTP://H.TEST/Api/", "http://[::1]:8080/api/",
        ]
        let paths = [
            "items/12", "/items/12", "items", "a/b/c", "Ann%20Bob", "x~y_z-1.json", "...", ".hidden", "a..b",
            "./items", "../items", "a/./b", "a/../b", "a/.", "a/..", ".", "..", "/..", "//other.test/x", "a%2", "%2e%2E/x",
            "a//b", "a/", "/", "%zz", "a b", "a?x=1", "a#f", "a:b", "ä", "",
        ]
        for base in bases.map({ URL(string: $0)! }) {
            let prepared = BaseURL(base)
            for path in paths.map(NetworkRequest.relativePart(of:)) {
                let expected = path.isEmpty ? base.appendingSlashIfNeeded() : URL(string: path, relativeTo: base.appendingSlashIfNeeded())?.absoluteURL
                #expect(prepared.resolve(path)?.absoluteString == expected?.absoluteString, "\(path) against \(base)")
            }
        }
        // The shortcut is taken for plain paths and refused for the rest.
        let directory = "http://h/api/"
        #expect(BaseURL.shortcutPrefix(for: "items/12", directory: directory) == directory)
        for refused in ["/items/12", "../x", "a/./b", "//h2/x", "a?b", "a:b", "", "%zz", "a%2", "a%"] {
            #expect(BaseURL.shortcutPrefix(for: refused, directory: directory) == nil, "\(refused)")
        }
    }
}
