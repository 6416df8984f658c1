@testable import Depot
import Foundation
import Testing

@Suite struct NetworkRequestTests {
    @Test func formBodyIsURLEncoded() throws {
        let body = try #require(NetworkRequest.post("/comments", form: ["comment": "Hi there!", "a+b": "1=1"]).body)
        #expect(body.contentType == "application/x-www-form-urlencoded")
        #expect(String(decoding: try body.encode(), as: UTF8.self) == "comment=Hi+there%21&a%2Bb=1%3D1")
    }

    @Test func jsonBodyIsEncodedLazily() throws {
        struct Post: Encodable, Sendable { var text: String }
        let body = try #require(NetworkRequest.post("/posts", json: Post(text: "hello")).body)
        #expect(body.contentType == "application/json")
        #expect(String(decoding: try body.encode(), as: UTF8.self) == #"{"text":"hello"}"#)
    }

    /// A retry with an Idempotency-Key must send the same bytes: keys are sorted,
    /// every time.
    @Test func jsonBodyIsTheSameBytesEveryTime() throws {
        struct Post: Encodable, Sendable { var text: String; var author: String; var reply: Int?; var tags: [String: Int] }
        let body = try #require(NetworkRequest.post("/posts", json: Post(text: "hi", author: "me", reply: 3, tags: ["b": 2, "a": 1, "c": 3])).body)
        let encodings = try Set((0..<50).map { _ in try body.encode() })
        #expect(encodings.count == 1)
        #expect(String(decoding: try body.encode(), as: UTF8.self) == #"{"author":"me","reply":3,"tags":{"a":1,"b":2,"c":3},"text":"hi"}"#)
    }

    @Test func headersAreCaseInsensitiveAndRedactedInDescriptions() {
        var headers: HeaderFields = ["Authorization": "Bearer x", "Accept": "a"]
        headers["accept"] = "b"
        headers.add(name: "Set-Cookie", value: "id=1")
        #expect(headers["ACCEPT"] == "b")
        #expect(headers.count == 3)
        #expect(headers.description == "Authorization: <redacted>, Accept: b, Set-Cookie: <redacted>")
        headers["authorization"] = nil
        #expect(!headers.contains("Authorization"))
    }

    @Test func coalescingKeysFollowTheMethodAndType() throws {
        struct Other: NetworkOperation {
            typealias Output = NetworkResponse
            var request: NetworkRequest { .get("/hello") }
        }
        let url = URL(string: "http://h/hello")!
        let a = NetworkController.coalescingKey(for: FetchHello(), method: .get, url: url)
        let b = NetworkController.coalescingKey(for: Other(), method: .get, url: url)
        #expect(a != nil && b != nil && a != b)
        #expect(a == NetworkController.coalescingKey(for: FetchHello(path: "/other"), method: .get, url: url))
        #expect(NetworkController.coalescingKey(for: PostEcho(text: "x"), method: .post, url: url) == nil)
    }
}
