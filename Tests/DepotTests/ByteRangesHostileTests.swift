@testable import Depot
import DepotTesting
import Foundation
import Testing

/// What a hostile or broken server may answer to a range request: each
/// answer ends the download with one clear error, never a joined body of
/// the wrong bytes.
@Suite(.timeLimit(.minutes(1))) struct ByteRangesHostileTests {
    /// How a scripted 20,000-byte resource answers the range from `start` to `end`.
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let code: DepotError.Code
        let detail: String
        let answer: @Sendable (_ start: Int, _ end: Int) -> TransportResponse
        var testDescription: String { name }
    }

    /// A correct `206` for bytes `start...end` of 20,000, with `changes` applied.
    static func part(_ start: Int, _ end: Int, body: Int? = nil, _ changes: (inout HeaderFields) -> Void = { _ in }) -> TransportResponse {
        var headers: HeaderFields = ["Content-Range": "bytes \(start)-\(end)/20000", "ETag": "\"v\""]
        changes(&headers)
        return TransportResponse(status: 206, headers: headers, body: TransportBody(data: Data(repeating: 0x62, count: body ?? end - start + 1)))
    }

    /// The first range answered with `changes`.
    static func first(_ name: String, _ code: DepotError.Code, _ detail: String, body: Int? = nil, _ changes: @escaping @Sendable (inout HeaderFields) -> Void) -> Case {
        Case(name: name, code: code, detail: detail) { start, end in start == 0 ? part(start, end, body: body, changes) : part(start, end) }
    }

    /// The second range answered by `answer`.
    static func second(_ name: String, _ code: DepotError.Code, _ detail: String, _ answer: @escaping @Sendable (Int, Int) -> TransportResponse) -> Case {
        Case(name: name, code: code, detail: detail) { start, end in start == 0 ? part(start, end) : answer(start, end) }
    }

    static let cases: [Case] = [
        first("no total", .transport, "invalid Content-Range \"bytes 0-8191\"") { $0["Content-Range"] = "bytes 0-8191" },
        first("unknown total", .transport, "invalid Content-Range") { $0["Content-Range"] = "bytes 0-8191/*" },
        first("another unit", .transport, "invalid Content-Range") { $0["Content-Range"] = "items 0-8191/20000" },
        first("a sign", .transport, "invalid Content-Range") { $0["Content-Range"] = "bytes -0-8191/20000" },
        first("end before start", .transport, "invalid Content-Range") { $0["Content-Range"] = "bytes 9-3/20000" },
        first("end past the total", .transport, "invalid Content-Range") { $0["Content-Range"] = "bytes 0-8191/8000" },
        first("19 digits", .transport, "invalid Content-Range") { $0["Content-Range"] = "bytes 0-8191/9223372036854775807" },
        first("control characters", .transport, "invalid Content-Range") { $0["Content-Range"] = "bytes 0-8191/2\u{1B}[2J" },
        first("another start", .transport, "Content-Range 1-8192 answers a request for bytes 0-8191") { $0["Content-Range"] = "bytes 1-8192/20000" },
        first("a shorter range", .transport, "Content-Range 0-99 answers a request for bytes 0-8191", body: 100) { $0["Content-Range"] = "bytes 0-99/20000" },
        first("a longer range", .transport, "answers a request for bytes 0-8191", body: 9000) { $0["Content-Range"] = "bytes 0-8999/20000" },
        first("a length that disagrees", .transport, "Content-Length 10 disagrees with Content-Range 0-8191") { $0["Content-Length"] = "10" },
        first("a total over the body limit", .tooLarge, "Content-Range total 99999999999 over the limit") { $0["Content-Range"] = "bytes 0-8191/99999999999" },
        first("more bytes than the range", .transport, "range 0-8191 brought more bytes than it holds", body: 9000) { _ in },
        first("fewer bytes than the range", .connectionLost, "range 0-8191 truncated after 100 of 8192 bytes", body: 100) { _ in },
        first("a whole body longer than its range", .transport, "range 0-4999 brought more bytes than it holds", body: 6_000) { $0["Content-Range"] = "bytes 0-4999/5000" },
        second("a new representation (200)", .connectionLost, "the resource changed between byte ranges") { _, _ in
            TransportResponse(status: 200, headers: ["ETag": "\"w\""], body: TransportBody(data: Data(count: 20_000)))
        },
        second("another total", .connectionLost, "the resource changed between byte ranges") { start, end in
            part(start, end) { $0["Content-Range"] = "bytes \(start)-\(end)/30000" }
        },
        second("another ETag", .connectionLost, "the resource changed between byte ranges") { start, end in
            part(start, end) { $0["ETag"] = "\"w\"" }
        },
        Case(name: "another Last-Modified, If-Range ignored", code: .connectionLost, detail: "the resource changed between byte ranges") { start, end in
            part(start, end) { headers in
                headers["ETag"] = nil
                headers["Date"] = "Wed, 21 Oct 2015 07:29:00 GMT"
                headers["Last-Modified"] = start == 0 ? "Wed, 21 Oct 2015 07:28:00 GMT" : "Wed, 21 Oct 2015 07:28:30 GMT"
            }
        },
        second("a server error", .connectionLost, "byte range 8192-16383 answered 503") { _, _ in
            TransportResponse(status: 503, body: .empty)
        },
        second("another start", .transport, "Content-Range 8193-16383 answers a request for bytes 8192-16383") { start, end in
            part(start, end) { $0["Content-Range"] = "bytes \(start + 1)-\(end)/20000" }
        },
        second("one byte at a time", .transport, "Content-Range 8192-8192 answers a request for bytes 8192-16383") { start, _ in
            part(start, start)
        },
        second("an encoding", .transport, "byte range 8192-16383 came with a Content-Encoding") { start, end in
            part(start, end) { $0["Content-Encoding"] = "gzip" }
        },
        second("fewer bytes than the range", .connectionLost, "range 8192-16383 truncated after 10 of 8192 bytes") { start, end in
            part(start, end, body: 10)
        },
    ]

    @Test(arguments: cases)
    func aBadAnswerEndsTheDownloadWithOneClearError(_ bad: Case) async throws {
        let transport = ScriptedTransport { request in
            let bounds = (request.headers["Range"] ?? "").dropFirst(6).split(separator: "-").compactMap { Int($0) }
            guard bounds.count == 2 else { return TransportResponse(status: 200, body: TransportBody(data: Data(count: 20_000))) }
            return bad.answer(bounds[0], min(bounds[1], 19_999))
        }
        try await withController(transport, configure: { $0.retries.policy = .never; $0.limits.maximumBodySize = 1 << 20 }) { controller in
            controller.assumeLinkMeasured()
            let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: URL(string: "http://script.invalid/big")!, priority: .low)) }
            #expect(error?.code == bad.code)
            #expect(error?.description.contains(bad.detail) == true, "\(error?.description ?? "no error")")
            // Text from the network reaches the error only as the sanitised excerpt.
            #expect(error?.description.contains("\u{1B}") == false)
        }
    }

    /// A resource dated by `Last-Modified` alone, rewritten within the second
    /// of that date: the first piece is of the old bytes (`a`), later ones and
    /// the whole body of the new (`c`), as a server that compares `If-Range`
    /// dates answers. Each case: the piece's `Date`, and whether the pieces may be joined.
    @Test(arguments: [
        ("Wed, 21 Oct 2015 07:28:00 GMT", false),
        ("Wed, 21 Oct 2015 07:28:01 GMT", true),
        (nil, false),
    ] as [(String?, Bool)])
    func aLastModifiedDateIsAValidatorOnlyOnceASecondOld(date: String?, joins: Bool) async throws {
        let modified = "Wed, 21 Oct 2015 07:28:00 GMT"
        let transport = ScriptedTransport { request in
            let range = request.headers["Range"] ?? ""
            var headers: HeaderFields = ["Last-Modified": modified]
            if let date { headers["Date"] = date }
            let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
            guard bounds.count == 2 else { return TransportResponse(status: 200, headers: headers, body: TransportBody(data: Data(repeating: 0x63, count: 20_000))) }
            let start = bounds[0], end = min(bounds[1], 19_999)
            headers["Content-Range"] = "bytes \(start)-\(end)/20000"
            let byte: UInt8 = joins || start > 0 ? 0x63 : 0x61
            return TransportResponse(status: 206, headers: headers, body: TransportBody(data: Data(repeating: byte, count: end - start + 1)))
        }
        try await withController(transport, configure: { $0.retries.policy = .never }) { controller in
            controller.assumeLinkMeasured()
            let response = try await controller.perform(FetchRaw(url: URL(string: "http://script.invalid/big")!, priority: .low))
            let oneRepresentation = response.body == Data(repeating: 0x63, count: 20_000)
            #expect(oneRepresentation, "a body joined from two representations")
            let expected = joins ? ["bytes=0-8191", "bytes=8192-16383", "bytes=16384-19999"] : ["bytes=0-8191", ""]
            #expect(transport.requests.map { $0.headers["Range"] ?? "" } == expected)
        }
    }

    @Test func contentRangeParsing() {
        #expect(ContentRange("bytes 0-8191/20000") == ContentRange("  BYTES 0-8191/20000 "))
        #expect(ContentRange("bytes 0-8191/20000")?.count == 8192)
        #expect(ContentRange("bytes 19999-19999/20000")?.count == 1)
        for bad in ["", "bytes", "bytes 0-1", "bytes */20000", "bytes 0-1/0", "bytes 1-0/5", "bytes 0--1/5", "bytes +0-1/5", "bytes 0-1/5/6", "bytes 0x1-2/5", "bytes 0-1/٣"] {
            #expect(ContentRange(bad) == nil, "\(bad)")
        }
    }

    @Test func rangesAreTwiceTheBudgetAndAtLeastTheirMinimum() {
        // Before the link is measured: 8 KB, then twice the previous range.
        #expect(DelayablePacing.default.rangeSize(budget: -1) == 8192)
        #expect(DelayablePacing.default.rangeSize(budget: -1, previous: 8192) == 16_384)
        #expect(DelayablePacing.default.rangeSize(budget: -1, previous: 1000) == 8192)
        #expect(DelayablePacing.default.rangeSize(budget: -1, previous: .max) == .max)
        #expect(DelayablePacing.default.rangeSize(budget: 1000, previous: 65_536) == 8192)
        #expect(DelayablePacing.default.rangeSize(budget: 0) == 8192)
        #expect(DelayablePacing.default.rangeSize(budget: 1000) == 8192)
        #expect(DelayablePacing.default.rangeSize(budget: 50_000) == 100_000)
        #expect(DelayablePacing.default.rangeSize(budget: .max) == Int.max)
        #expect(DelayablePacing.off.rangeSize(budget: 50_000) == nil)
        #expect(DelayablePacing.bandwidthDelay(roundTrips: 2, rangeBytes: nil).rangeSize(budget: 50_000) == nil)
        #expect(DelayablePacing.bandwidthDelay(roundTrips: 2, rangeBytes: 10).rangeBytes == 1024)
        // A budget past Int64 is no limit, not a trap.
        #expect(DelayablePacing.bandwidthDelay(roundTrips: 1e30).budget(bandwidth: 1e9, minimumRTT: .seconds(1)) == .max)
    }
}
