import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Seeded
import Synchronization

/// The Twitter-like routes of the Timeline example: the timeline (newest
/// first; `since=ID` for newer posts, `before=ID` for older ones, `limit=N` up
/// to 100,000), posting and deleting with an Idempotency-Key
/// (``IdempotencyKeys``), the live changes, and PNG avatars.
///
/// Every post created (`POST /posts`, or `POST /_control {"timelineChanges"}`)
/// and every post deleted (`DELETE /posts/:id`, or the control) is a change
/// with the next number of one sequence; the posts at start are the state at
/// number 0. `GET /timeline` says in `Change-Cursor` which number its snapshot
/// is at; `GET /timeline/events` streams the changes as server-sent events
/// (``EventStream``: `event: post` with the post as `GET /timeline` encodes
/// it, `event: delete` with `{"id":N}`), and `GET /timeline/changes?since=N`
/// pages through them (``ChangeFeed/changesResponse(to:)``).
enum TimelineRoutes {
    struct Post: Codable, Sendable, Hashable {
        var id: Int
        var author: String
        var text: String
        var avatar: String
    }

    /// The most posts one `GET /timeline` answers (a full refetch of a large collection).
    static let maximumLimit = 100_000

    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        let feed = state.timeline
        let keys = IdempotencyKeys { state.countDelivery(ofIdempotencyKey: $0, route: $1) }

        router.get("/timeline") { request, _ in
            let since = request.uri.queryParameters.get("since", as: Int.self) ?? 0
            // Older posts: those before an id the client has (the last of its oldest page).
            let before = request.uri.queryParameters.get("before", as: Int.self) ?? Int.max
            let limit = max(1, min(request.uri.queryParameters.get("limit", as: Int.self) ?? 50, maximumLimit))
            // The posts and the number of the last change they include, under one lock.
            let (posts, cursor) = feed.read { model, log in (model.newestFirst(since: since, before: before, limit: limit), log.sequence) }
            var response = try SenbeiRoutes.json(posts)
            response.headers[ChangeFeed<Model, Change>.changeCursorHeader] = "\(cursor)"
            return response
        }

        router.get("/timeline/events") { request, context in
            EventStream.response(to: request, context: context, feed: feed, state: state)
        }

        router.get("/timeline/changes") { request, _ in
            try feed.changesResponse(to: request)
        }

        router.post("/posts") { request, _ in
            try await keys.respond(to: request) { data in
                struct NewPost: Decodable { var text: String?; var author: String? }
                let body = try? JSONDecoder().decode(NewPost.self, from: Data(buffer: data))
                guard let text = body?.text?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty, text.count <= 280 else {
                    return try SenbeiRoutes.invalid(["text": ["must be 1 to 280 characters"]])
                }
                let post = feed.write { model, log in model.add(author: body?.author ?? "you", text: text, avatar: "/avatars/1.png", log: &log) }
                return try SenbeiRoutes.json(post, status: .created)
            }
        }

        router.delete("/posts/:id") { request, context in
            try await keys.respond(to: request) { _ in
                let id = try context.parameters.require("id", as: Int.self)
                let deleted = feed.write { model, log in model.delete(id: id, log: &log) }
                return deleted ? Response(status: .noContent) : try SenbeiRoutes.invalidStatus(.notFound, ["base": ["there is no post \(id)"]])
            }
        }

        router.get("/avatars/:file") { request, context in
            let file = try context.parameters.require("file")
            guard file.hasSuffix(".png"), let id = Int(file.dropLast(4)), id > 0 else {
                return FaultRoutes.text(.notFound, "avatars are /avatars/N.png")
            }
            let png = PNG.avatar(id: id, bytes: state.configuration.avatarBytes)
            let headers: HTTPFields = [.contentType: "image/png", .cacheControl: "max-age=86400", .eTag: "\"a\(id)-\(png.count)\""]
            return ByteRanges.response(to: request, body: ByteBuffer(bytes: png), headers: headers)
        }
    }
}

/// A minimal PNG encoder: 8-bit RGB, stored (uncompressed) deflate blocks, so
/// the file size follows the pixel count and every file is a real PNG.
enum PNG {
    /// A square avatar of about `bytes` bytes, coloured from its id.
    static func avatar(id: Int, bytes: Int) -> [UInt8] {
        let side = max(1, Int((Double(max(bytes, 100)) / 3).squareRoot()))
        var random = SplitMix64(seed: UInt64(id))
        let base = (UInt8(random.next() % 200), UInt8(random.next() % 200), UInt8(random.next() % 200))
        var raw: [UInt8] = []
        raw.reserveCapacity(side * (side * 3 + 1))
        for y in 0..<side {
            raw.append(0)  // filter: none
            for x in 0..<side {
                let ring = ((x - side / 2) * (x - side / 2) + (y - side / 2) * (y - side / 2)) < (side * side / 9)
                raw += ring ? [255 - base.0, 255 - base.1, 255 - base.2] : [base.0, base.1, base.2]
            }
        }
        return encode(width: side, height: side, rgb: raw)
    }

    static func encode(width: Int, height: Int, rgb raw: [UInt8]) -> [UInt8] {
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var header: [UInt8] = []
        header += bigEndian(UInt32(width)) + bigEndian(UInt32(height))
        header += [8, 2, 0, 0, 0]  // 8-bit, truecolour, deflate, adaptive filtering, no interlace
        png += chunk("IHDR", header)
        png += chunk("IDAT", zlibStored(raw))
        png += chunk("IEND", [])
        return png
    }

    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let size = min(65_535, data.count - offset)
            let last: UInt8 = offset + size >= data.count ? 1 : 0
            out.append(last)
            out += [UInt8(size & 0xFF), UInt8(size >> 8), UInt8(~size & 0xFF), UInt8((~size >> 8) & 0xFF)]
            out += data[offset..<(offset + size)]
            offset += size
        } while offset < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        return out + bigEndian(b << 16 | a)
    }

    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + typed + bigEndian(crc32(typed))
    }

    static let crcTable: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = crcTable[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
