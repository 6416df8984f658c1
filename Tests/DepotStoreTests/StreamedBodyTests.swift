import Depot
@testable import DepotStore
import DepotTesting
import Foundation
import Testing

/// Where a streamed body waits for its write: in memory up to a limit, then in
/// a file that has no name; it comes back whole and in order.
@Suite(.timeLimit(.minutes(1))) struct StreamedBodyTests {
    /// Every chunk `body` gives, until `nil`.
    func drain(_ body: StreamedBody) throws -> [Data] {
        var chunks: [Data] = []
        while let chunk = try body.next() { chunks.append(chunk) }
        return chunks
    }

    /// A new empty folder, removed when `body` returns.
    func withFolder(_ body: (URL) throws -> Void) throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try body(folder)
    }

    @Test func aBodyWithinTheMemoryLimitComesBackChunkByChunk() throws {
        try withFolder { folder in
            let spool = BodySpool(memoryLimit: 10, folder: folder)
            let sent = [Data("ab".utf8), Data("cde".utf8), Data("fghij".utf8)]
            for chunk in sent { try spool.append(chunk) }

            let body = try spool.finish()

            #expect(try drain(body) == sent)
            #expect(try body.next() == nil)
            #expect(spool.bytesInFile == 0)
        }
    }

    @Test func aBodyOverTheLimitGoesToAFileWithNoNameAndComesBackWhole() throws {
        try withFolder { folder in
            // Given 300 KB in chunks of 1 to 4,000 bytes, over a 1,000-byte memory limit
            var generator = SplitMix64(seed: 5)
            let sent = (0..<150).map { _ in Data((0..<Int.random(in: 1...4_000, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }) }
            let spool = BodySpool(memoryLimit: 1_000, folder: folder)
            for chunk in sent { try spool.append(chunk) }

            // Then all but the first bytes went to a file, which has no name in the folder
            var inMemory = 0
            for chunk in sent {
                guard inMemory + chunk.count <= 1_000 else { break }
                inMemory += chunk.count
            }
            #expect(spool.bytesInFile == Int64(sent.reduce(0) { $0 + $1.count } - inMemory))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)

            // And the body comes back as it was sent, in pieces of at most 64 KB
            let chunks = try drain(spool.finish())
            #expect(chunks.reduce(Data(), +) == sent.reduce(Data(), +))
            #expect(chunks.allSatisfy { $0.count <= StreamedBody.fileChunkBytes })
        }
    }

    @Test func aDiscardedBodyKeepsNothingAndDropsLaterChunks() throws {
        try withFolder { folder in
            let spool = BodySpool(memoryLimit: 4, folder: folder)
            try spool.append(Data("abcdefgh".utf8))
            #expect(spool.bytesInFile == 8)

            spool.discard()
            try spool.append(Data("ijkl".utf8))

            #expect(spool.bytesInFile == 8)
            #expect(try drain(spool.finish()).isEmpty)
        }
    }

    @Test func aFolderThatCannotHoldTheBodyIsAStorageError() throws {
        try withFolder { folder in
            let missing = folder.appending(path: "missing")
            let spool = BodySpool(memoryLimit: 4, folder: missing)
            try spool.append(Data("abc".utf8))

            let error = #expect(throws: DepotError.self) { try spool.append(Data("defg".utf8)) }

            #expect(error?.code == .storage)
            #expect(error?.description.contains(missing.path) == true)
        }
    }
}
