@testable import Depot
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1))) struct FileTransportTests {
    struct Item: Codable, Equatable, Sendable {
        var id: Int
        var title: String
    }

    struct LoadItems: NetworkOperation {
        typealias Output = [Item]
        var url: URL
        var request: NetworkRequest { .get(url) }
    }

    func temporaryFile(_ contents: Data, name: String = "items.json") throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("depot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent(name)
        try contents.write(to: url)
        return url
    }

    @Test func servesAFlatFileToAnOperation() async throws {
        let items = (1...3).map { Item(id: $0, title: "Item \($0)") }
        let url = try temporaryFile(try JSONEncoder().encode(items))
        try await withController(FileTransport()) { controller in
            let output = try await controller.perform(LoadItems(url: url))
            #expect(output == items)
        }
    }

    @Test func streamsLargeFilesInChunksWithProgress() async throws {
        let url = try temporaryFile(Data(repeating: 7, count: 200_000), name: "blob.bin")
        let response = try await FileTransport(chunkSize: 64 * 1024).send(TransportRequest(url: url))
        #expect(response.status == 200)
        #expect(response.expectedLength == 200_000)
        #expect(response.headers["Content-Type"] == "application/octet-stream")
        var sizes: [Int] = []
        for try await chunk in response.body { sizes.append(chunk.count) }
        #expect(sizes == [65536, 65536, 65536, 3392])
    }

    @Test func missingFileIsNotFound() async throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("depot-missing-\(UUID().uuidString).json")
        try await withController(FileTransport()) { controller in
            let error = await DepotError.from { _ = try await controller.perform(LoadItems(url: url)) }
            #expect(error?.code == .notFound)
        }
    }

    @Test func malformedFileIsADecodingError() async throws {
        let url = try temporaryFile(Data(#"[{"id": 1, "title": "ok"}, {"id": "#.utf8))
        try await withController(FileTransport()) { controller in
            let error = await DepotError.from { _ = try await controller.perform(LoadItems(url: url)) }
            #expect(error?.code == .decoding)
            #expect(error?.bodyExcerpt?.hasPrefix(#"[{"id": 1"#) == true)
        }
    }

    @Test func fileOverTheLimitIsTooLarge() async throws {
        let url = try temporaryFile(Data(count: 5000), name: "big.bin")
        try await withController(FileTransport(), configure: { $0.limits.maximumBodySize = 4096 }) { controller in
            let error = await DepotError.from { _ = try await controller.perform(FetchRaw(url: url)) }
            #expect(error?.code == .tooLarge)
        }
    }

    @Test func refusesOtherSchemesAndMethods() async throws {
        let error = await DepotError.from { _ = try await FileTransport().send(TransportRequest(url: URL(string: "http://127.0.0.1/")!)) }
        #expect(error?.code == .invalidRequest)
        let url = try temporaryFile(Data("x".utf8))
        let post = try await FileTransport().send(TransportRequest(url: url, method: .post))
        #expect(post.status == 405)
    }
}
