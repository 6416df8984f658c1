import Foundation
import Hummingbird
import NIOCore

/// Single byte ranges (RFC 9110 §14): how the demo server answers `Range`.
enum ByteRanges {
    /// `body` with `headers`, or the one range that `Range: bytes=…` asks for
    /// as `206`. `If-Range` with another validator than the `ETag` in
    /// `headers` gets the whole body; a range past the end gets `416`; a
    /// list of ranges, or any other unit, gets the whole body too (a server
    /// may always ignore `Range`).
    static func response(to request: Request, body: ByteBuffer, headers: HTTPFields) -> Response {
        var headers = headers
        headers[.acceptRanges] = "bytes"
        guard let asked = request.headers[.range], request.method == .get else {
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        if let condition = request.headers[.ifRange], condition != headers[.eTag] {
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        let length = body.readableBytes
        guard let (first, last) = bounds(of: asked, length: length) else {
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        guard first < length else {
            headers[.contentRange] = "bytes */\(length)"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        }
        let end = min(last, length - 1)
        headers[.contentRange] = "bytes \(first)-\(end)/\(length)"
        let part = body.getSlice(at: body.readerIndex + first, length: end - first + 1) ?? ByteBuffer()
        return Response(status: .partialContent, headers: headers, body: .init(byteBuffer: part))
    }

    /// `bytes=a-b`, `bytes=a-` or `bytes=-n` as first and last byte offsets;
    /// `nil` for anything else.
    static func bounds(of value: String, length: Int) -> (Int, Int)? {
        guard value.hasPrefix("bytes="), !value.contains(",") else { return nil }
        let parts = value.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let from = parts[0].trimmingCharacters(in: .whitespaces)
        let to = parts[1].trimmingCharacters(in: .whitespaces)
        if from.isEmpty {
            guard let suffix = Int(to), suffix > 0 else { return nil }
            return (max(0, length - suffix), length - 1)
        }
        guard let first = Int(from), first >= 0 else { return nil }
        if to.isEmpty { return (first, Int.max) }
        // A last byte before the first makes the field invalid: ignored, as RFC 9110 §14.1.1 says.
        guard let last = Int(to), last >= first else { return nil }
        return (first, last)
    }
}
