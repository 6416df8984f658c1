import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Seeded
import Synchronization

/// The Twitter-like routes of the Timeline example: the timeline (newest
/// first; `since=ID` for newer posts, `before=ID` for older ones, `limit=N`), posting with
/// an Idempotency-Key (``IdempotencyKeys``), and PNG avatars.
enum TimelineRoutes {
    struct Post: Codable, Sendable, Hashable {
        var id: Int
        var author: String
        var text: String
        var avatar: String
    }

    static func add(to router: Router<DemoRequestContext>, state: ServerState) {
        var random = SplitMix64(seed: state.configuration.seed &+ 7)
        let authors = ["joeconway", "aaronh", "bnr_student", "swiftling", "feedreader42", "mainactor", "kmackenzie", "mikew", "offline_first", "tunnelrat", "retry_after", "sendable"]
        let lines = ["Shipped it.", "Who else is offline right now?", "The timeline loads before the avatars. As it should.", "Retry-After: 30", "Cache first, ask later.", "Posting from the tunnel."]
        let initial = (1...30).map { id -> Post in
            let author = Int(random.next() % UInt64(authors.count))
            return Post(id: id, author: authors[author], text: lines[Int(random.next() % UInt64(lines.count))], avatar: "/avatars/\(author + 1).png")
        }
        let stored = Mutex(initial)
        let keys = IdempotencyKeys()

        router.get("/timeline") { request, _ in
            let since = request.uri.queryParameters.get("since", as: Int.self) ?? 0
            // Older posts: those before an id the client has (the last of its oldest page).
            let before = request.uri.queryParameters.get("before", as: Int.self) ?? Int.max
            let limit = max(1, min(request.uri.queryParameters.get("limit", as: Int.self) ?? 50, 200))
            let posts = stored.withLock { Array($0.filter { $0.id > since && $0.id < before }.sorted { $0.id > $1.id }.prefix(limit)) }
            return try SenbeiRoutes.json(posts)
        }

        router.post("/posts") { request, _ in
            try await keys.respond(to: request) { data in
                struct NewPost: Decodable { var text: String?; var author: String? }
                let body = try? JSONDecoder().decode(NewPost.self, from: Data(buffer: data))
                let status: HTTPResponse.Status
                let payload: Data
                if let text = body?.text?.trimmingCharacters(in: .whitespacesAndNewlines), !text.isEmpty, text.count <= 280 {
                    let post = stored.withLock { posts -> Post in
                        let post = Post(id: (posts.map(\.id).max() ?? 0) + 1, author: body?.author ?? "you", text: text, avatar: "/avatars/1.png")
                        posts.append(post)
                        return post
                    }
                    payload = try SenbeiRoutes.encoder.encode(post)
                    status = .created
                } else {
                    payload = try SenbeiRoutes.encoder.encode(["errors": ["text": ["must be 1 to 280 characters"]]])
                    status = .unprocessableContent
                }
                return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: payload)))
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
