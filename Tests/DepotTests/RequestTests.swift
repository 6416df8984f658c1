@testable import Depot
import Foundation
import Testing

@Suite struct RequestTests {
    let base = URL(string: "http://127.0.0.1:8080/api")!

    @Test func resolvesPathsAgainstTheBaseURL() throws {
        #expect(try Request.get("contacts").resolvedURL(baseURL: base).absoluteString == "http://127.0.0.1:8080/api/contacts")
        #expect(try Request.get("/contacts").resolvedURL(baseURL: base).absoluteString == "http://127.0.0.1:8080/contacts")
        #expect(try Request.get("http://other.test/x").resolvedURL(baseURL: base).absoluteString == "http://other.test/x")
        #expect(try Request.get("a/b:c").resolvedURL(baseURL: base).absoluteString == "http://127.0.0.1:8080/api/a/b:c")
        #expect(try Request.get("x").resolvedURL(baseURL: URL(string: "http://h.test")!).absoluteString == "http://h.test/x")
        #expect(try Request.get("x").resolvedURL(baseURL: URL(string: "http://h.test/api/")!).absoluteString == "http://h.test/api/x")
        for (text, expected) in [("http://a", true), ("a://", true), ("::/:", false), (":/:/", false), ("/x:/y", false), ("://", true), ("", false), (":///", true)] {
            #expect(Request.hasSchemeSeparator(text) == expected, "\(text)")
        }
    }

    @Test func encodesQueryItemsInOrder() throws {
        let url = try Request.get("/contacts", query: ["page": "2", "query": "Ann & Bob"]).resolvedURL(baseURL: base)
        #expect(url.absoluteString == "http://127.0.0.1:8080/contacts?page=2&query=Ann+%26+Bob")
    }

    @Test func keepsAnExistingQuery() throws {
        let url = try Request.get("/timeline?since=5", query: ["limit": "20"]).resolvedURL(baseURL: base)
        #expect(url.query == "since=5&limit=20")
    }

    @Test func relativePathNeedsABaseURL() {
        #expect(throws: DepotError.self) { try Request.get("/x").resolvedURL(baseURL: nil) }
    }

    @Test func formBodyIsURLEncoded() throws {
        let body = try #require(Request.post("/comments", form: ["comment": "Hi there!", "a+b": "1=1"]).body)
        #expect(body.contentType == "application/x-www-form-urlencoded")
        #expect(String(decoding: try body.encode(), as: UTF8.self) == "comment=Hi+there%21&a%2Bb=1%3D1")
    }

    @Test func jsonBodyIsEncodedLazily() throws {
        struct Post: Encodable, Sendable { var text: String }
        let body = try #require(Request.post("/posts", json: Post(text: "hello")).body)
        #expect(body.contentType == "application/json")
        #expect(String(decoding: try body.encode(), as: UTF8.self) == #"{"text":"hello"}"#)
    }

    /// A retry with an Idempotency-Key must send the same bytes: keys are sorted,
    /// every time.
    @Test func jsonBodyIsTheSameBytesEveryTime() throws {
        struct Post: Encodable, Sendable { var text: String; var author: String; var reply: Int?; var tags: [String: Int] }
        let body = try #require(Request.post("/posts", json: Post(text: "hi", author: "me", reply: 3, tags: ["b": 2, "a": 1, "c": 3])).body)
        let encodings = try Set((0..<50).map { _ in try body.encode() })
        #expect(encodings.count == 1)
        #expect(String(decoding: try body.encode(), as: UTF8.self) == #"{"author":"me","reply":3,"tags":{"a":1,"b":2,"c":3},"text":"hi"}"#)
    }

    @Test func headersAreCaseInsensitiveAndRedactedInDescriptions() {
        var headers: HTTPHeaders = ["Authorization": "Bearer x", "Accept": "a"]
        headers["accept"] = "b"
        headers.add(name: "Set-Cookie", value: "id=1")
        #expect(headers["ACCEPT"] == "b")
        #expect(headers.count == 3)
        #expect(headers.description == "Authorization: <redacted>, Accept: b, Set-Cookie: <redacted>")
        headers["authorization"] = nil
        #expect(!headers.contains("Authorization"))
    }

    /// The controller joins plain paths to its base by concatenation; that must
    /// give what RFC 3986 resolution (Foundation's) gives, for every path.
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
            for path in paths {
                let expected = URL(string: path, relativeTo: base.appendingSlashIfNeeded())?.absoluteURL
                #expect(prepared.resolve(path)?.absoluteString == expected?.absoluteString, "\(path) against \(base)")
            }
        }
        // The shortcut is taken for plain paths and refused for the rest.
        let directory = "http://h/api/", root = "http://h"
        #expect(BaseURL.shortcutPrefix(for: "items/12", directory: directory, root: root) == directory)
        #expect(BaseURL.shortcutPrefix(for: "/items/12", directory: directory, root: root) == root)
        for refused in ["../x", "a/./b", "//h2/x", "a?b", "a:b", "", "%zz", "a%2", "a%"] {
            #expect(BaseURL.shortcutPrefix(for: refused, directory: directory, root: root) == nil, "\(refused)")
        }
    }

    @Test func coalescingKeysFollowTheMethodAndType() throws {
        struct Other: NetworkOperation {
            typealias Output = Response
            var request: Request { .get("/hello") }
        }
        let url = URL(string: "http://h/hello")!
        let a = NetworkController.coalescingKey(for: FetchHello(), method: .get, url: url)
        let b = NetworkController.coalescingKey(for: Other(), method: .get, url: url)
        #expect(a != nil && b != nil && a != b)
        #expect(a == NetworkController.coalescingKey(for: FetchHello(path: "/other"), method: .get, url: url))
        #expect(NetworkController.coalescingKey(for: PostEcho(text: "x"), method: .post, url: url) == nil)
    }
}
