import Foundation

/// A ``Transport`` that serves `file://` URLs, so a test can point an operation
/// at a flat file (URLSession on Linux rejects `file://`).
///
/// ```swift
/// let fixture = Bundle.module.url(forResource: "feed", withExtension: "xml")!
/// let controller = NetworkController(configuration: .init(transport: FileTransport()))
/// let items = try await controller.perform(FetchForumFeed(url: fixture))
/// ```
///
/// A missing file answers 404; a directory answers 403. Only GET and HEAD are served.
/// Responses carry `Content-Length` and a `Content-Type` guessed from the extension.
public struct FileTransport: Transport {
    /// The size of the chunks the body is read in.
    public var chunkSize: Int

    /// Makes a file transport.
    public init(chunkSize: Int = 64 * 1024) {
        self.chunkSize = max(1, chunkSize)
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        guard request.url.isFileURL else {
            throw DepotError(.invalidRequest, detail: "FileTransport serves file:// URLs only, not \(Redaction.default.url(request.url))")
        }
        guard request.method == .get || request.method == .head else {
            return TransportResponse(status: 405, headers: ["Allow": "GET, HEAD"], body: .empty)
        }
        try Task.checkCancellation()
        let path = request.url.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            return TransportResponse(status: 404, headers: ["Content-Length": "0"], body: .empty)
        }
        if isDirectory.boolValue {
            return TransportResponse(status: 403, headers: ["Content-Length": "0"], body: .empty)
        }
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: request.url)
        } catch {
            return TransportResponse(status: 403, headers: ["Content-Length": "0"], body: .empty)
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
        var headers: HeaderFields = ["Content-Type": Self.contentType(for: request.url)]
        if let size { headers["Content-Length"] = "\(size)" }
        if request.method == .head {
            try? handle.close()
            return TransportResponse(status: 200, headers: headers, body: .empty)
        }
        let chunkSize = self.chunkSize
        // Pull-based: a chunk is read only when the consumer asks for one. The handle
        // closes itself when the body is released, also after an early stop.
        let body = TransportBody(unfolding: {
            do {
                guard let chunk = try handle.read(upToCount: chunkSize), !chunk.isEmpty else { return nil }
                return chunk
            } catch {
                throw DepotError(.connectionLost, detail: "reading \(path) failed", underlying: error)
            }
        })
        return TransportResponse(status: 200, headers: headers, body: body)
    }

    static func contentType(for url: URL) -> String {
        switch url.pathExtension.lowercased() {
        case "json": return "application/json"
        case "xml": return "application/xml"
        case "rss": return "application/rss+xml"
        case "atom": return "application/atom+xml"
        case "html", "htm": return "text/html; charset=utf-8"
        case "txt": return "text/plain; charset=utf-8"
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        default: return "application/octet-stream"
        }
    }
}
