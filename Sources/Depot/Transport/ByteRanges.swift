import Foundation

/// A delayable download fetched in byte ranges (see ``DelayablePacing``): the
/// first range's answer decides whether the rest follows in ranges, whole, or
/// from a new request without `Range`; the ranges then reach the caller as one
/// `200` body.
extension TransferPipeline {
    /// How a download is split: the size of each next range, and what to
    /// await before asking for it.
    struct Ranges: Sendable {
        /// The next range's size in bytes (at least 1), given the size of the
        /// one before it (`nil` for the first).
        let size: @Sendable (_ previous: Int?) -> Int
        /// Returns when the next range may be asked for.
        let mayContinue: @Sendable () async -> Void
        /// A range's last byte arrived, and the next is yet to be asked for.
        var partEnded: @Sendable () -> Void = {}
        /// The next range's head arrived.
        var partBegan: @Sendable () -> Void = {}
    }

    /// What the answer to a first range request means.
    enum FirstRange {
        /// Use this head: the whole body, or the first range of a joined body.
        case use(TransportResponse)
        /// The pieces cannot be joined safely: ask again without `Range`.
        case askWhole
    }

    /// Reads the answer to `request`, which asked for bytes 0 to `askedEnd`.
    func firstRange(_ head: TransportResponse, of request: TransportRequest, askedEnd: Int64, ranges: Ranges, watching key: DeadlineWatch.Key) throws -> FirstRange {
        // 416: an empty resource has no first byte. Anything but 206 is not a range.
        if head.status == 416 { return .askWhole }
        guard head.status == 206 else { return .use(head) }
        let range = try ContentRange(validating: head, startingAt: 0, askedEnd: askedEnd)
        if range.total > Int64(maximumBodySize) {
            throw DepotError(.tooLarge, status: 206, detail: "Content-Range total \(range.total) over the limit of \(maximumBodySize) bytes")
        }
        let encoded = head.isEncoded
        var whole = head
        whole.status = 200
        whole.headers.remove(name: "Content-Range")
        whole.headers["Content-Length"] = String(range.total)
        // Pieces are joined only as they are on the wire (a transport may decode
        // a Content-Encoding), and only if they are certainly of one
        // representation; a range that is the whole body needs no validator.
        let validator = Self.validator(of: head)
        guard !encoded, validator != nil || range.end + 1 == range.total else { return .askWhole }
        // The whole body too goes through a ranged body, which holds it to its Content-Range.
        let body = RangedBody(
            first: head.body, range: range, validator: validator, request: request,
            transport: transport, ranges: ranges, watch: watch, key: key
        )
        whole.body = TransportBody(unfolding: { try await body.next() })
        return .use(whole)
    }

    /// A strong `ETag`, else a strong `Last-Modified`: what `If-Range` may carry.
    ///
    /// A date is strong only when the response's `Date` is at least a second
    /// later (RFC 9110 §8.8.2.2, §13.1.5): a representation changed within
    /// that second keeps its `Last-Modified`, and `If-Range` could not tell.
    static func validator(of head: TransportResponse) -> String? {
        if let tag = head.headers["ETag"]?.trimmingCharacters(in: .whitespaces), tag.hasPrefix("\""), tag.count >= 2, tag.hasSuffix("\"") {
            return tag
        }
        guard let modified = head.headers["Last-Modified"]?.trimmingCharacters(in: .whitespaces), let modifiedAt = RetryAfter.httpDate(modified),
              let date = head.headers["Date"].flatMap({ RetryAfter.httpDate($0.trimmingCharacters(in: .whitespaces)) }),
              date.timeIntervalSince(modifiedAt) >= 1
        else { return nil }
        return modified
    }
}

/// A `Content-Range: bytes first-last/total` header, checked against the
/// response it came with.
struct ContentRange: Equatable {
    let start: Int64
    let end: Int64
    let total: Int64

    var count: Int64 { end - start + 1 }

    /// Parses `bytes first-last/total` (RFC 9110 §14.4); `nil` for anything
    /// else, an unknown total (`*`) or a range outside the total.
    init?(_ text: String) {
        let value = text.trimmingCharacters(in: .whitespaces)
        guard value.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = value.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let start = Self.number(bounds[0]), let end = Self.number(bounds[1]), let total = Self.number(parts[1]),
              start <= end, end < total
        else { return nil }
        self.start = start
        self.end = end
        self.total = total
    }

    /// The range of a `206` that answers a request for bytes `start` to
    /// `askedEnd`: a valid header, exactly those bytes (or up to the last
    /// one), and a `Content-Length` (if any) that agrees. A server that
    /// answered less could make a download of a million round trips.
    init(validating head: TransportResponse, startingAt start: Int64, askedEnd: Int64) throws {
        let header = head.headers["Content-Range"] ?? ""
        guard let range = ContentRange(header) else {
            let shown = DepotError.excerpt(of: Data(header.utf8), limit: 80) ?? ""
            throw DepotError(.transport, status: head.status, detail: "invalid Content-Range \"\(shown)\"")
        }
        guard range.start == start, range.end == min(askedEnd, range.total - 1) else {
            throw DepotError(.transport, status: head.status, detail: "Content-Range \(range.start)-\(range.end) answers a request for bytes \(start)-\(askedEnd)")
        }
        if let length = head.expectedLength, length != range.count {
            throw DepotError(.transport, status: head.status, detail: "Content-Length \(length) disagrees with Content-Range \(range.start)-\(range.end)")
        }
        self = range
    }

    /// Only ASCII digits, at most 18 of them (no sign, no overflow).
    private static func number(_ text: Substring) -> Int64? {
        guard (1...18).contains(text.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int64(text)
    }
}

/// The body of a download joined from byte ranges: the first range's body,
/// then each next range asked for once its predecessor has ended and
/// ``TransferPipeline/Ranges/mayContinue`` returned, with `If-Range` so that
/// a changed representation is not joined to the old one.
///
/// `@unchecked Sendable` is sound: the mutable properties (`part`, `range`,
/// `received`) are touched only inside `next()` and the `ask(from:)` it
/// awaits, and `next()` never runs twice at once. Its one caller is the
/// closure of the ``TransportBody/init(unfolding:)`` made beside it in
/// ``TransferPipeline/firstRange(_:of:askedEnd:ranges:watching:)``; that
/// body allows one iterator, and the pipeline's single `for try await` loop
/// awaits each chunk before it asks for the next, so each call happens
/// after the one before (in one task, even across threads). The other
/// properties are constants of Sendable types.
final class RangedBody: @unchecked Sendable {
    private var part: TransportBody.AsyncIterator
    /// The range `part` brings, and how much of it arrived.
    private var range: ContentRange
    private var received: Int64 = 0
    /// What `If-Range` carries; `nil` only when the first range is the whole body.
    private let validator: String?
    private let request: TransportRequest
    private let transport: any Transport
    private let ranges: TransferPipeline.Ranges
    private let watch: DeadlineWatch
    private let key: DeadlineWatch.Key

    init(first: TransportBody, range: ContentRange, validator: String?, request: TransportRequest, transport: any Transport, ranges: TransferPipeline.Ranges, watch: DeadlineWatch, key: DeadlineWatch.Key) {
        self.part = first.makeAsyncIterator()
        self.range = range
        self.validator = validator
        self.request = request
        self.transport = transport
        self.ranges = ranges
        self.watch = watch
        self.key = key
    }

    func next() async throws -> Data? {
        while true {
            if var chunk = try await part.next() {
                guard !chunk.isEmpty else { continue }
                let room = range.count - received
                if Int64(chunk.count) > room {
                    throw DepotError(.transport, status: 206, detail: "range \(range.start)-\(range.end) brought more bytes than it holds")
                }
                received += Int64(chunk.count)
                if chunk.startIndex != 0 { chunk = Data(chunk) }
                return chunk
            }
            // A cancelled consumer sees the part end early: that is the cancellation, not a truncation.
            try Task.checkCancellation()
            if received < range.count {
                throw DepotError(.connectionLost, status: 206, detail: "range \(range.start)-\(range.end) truncated after \(received) of \(range.count) bytes")
            }
            let start = range.end + 1
            guard start < range.total else { return nil }
            ranges.partEnded()
            // Waiting for urgent work is not the network being idle.
            watch.pause(key)
            await ranges.mayContinue()
            watch.resume(key)
            try Task.checkCancellation()
            try await ask(from: start)
        }
    }

    /// Asks for the range that starts at `start`, and checks its head.
    private func ask(from start: Int64) async throws {
        guard let validator else { throw DepotError(.transport, detail: "no validator to ask for byte \(start) with") }
        // A size past what is left asks for the rest (`start + size` could overflow).
        let size = Int64(max(1, ranges.size(Int(clamping: range.count))))
        let end = size >= range.total - start ? range.total - 1 : start + size - 1
        var next = request
        next.headers["Range"] = "bytes=\(start)-\(end)"
        next.headers["If-Range"] = validator
        let head = try await transport.send(next)
        watch.touch(key)
        ranges.partBegan()
        guard head.status == 206 else {
            // 200: If-Range found the representation changed, and the server sent the new one whole.
            let why = head.status == 200 ? "the resource changed between byte ranges" : "byte range \(start)-\(end) answered \(head.status)"
            head.body.cancel()
            throw DepotError(.connectionLost, status: head.status, detail: why)
        }
        let answered: ContentRange
        do {
            answered = try ContentRange(validating: head, startingAt: start, askedEnd: end)
        } catch {
            head.body.cancel()
            throw error
        }
        let encoded = head.isEncoded
        // If-Range already asked the server; a server that ignores it is caught here too.
        let sameTag = head.headers[validator.hasPrefix("\"") ? "ETag" : "Last-Modified"].map { $0.trimmingCharacters(in: .whitespaces) == validator } ?? true
        guard answered.total == range.total, sameTag else {
            head.body.cancel()
            throw DepotError(.connectionLost, status: 206, detail: "the resource changed between byte ranges")
        }
        guard !encoded else {
            head.body.cancel()
            throw DepotError(.transport, status: 206, detail: "byte range \(start)-\(end) came with a Content-Encoding")
        }
        part = head.body.makeAsyncIterator()
        range = answered
        received = 0
    }
}
