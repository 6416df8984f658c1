import Depot
import Foundation
import Synchronization

/// A response body, read chunk by chunk inside a ``StreamingCachingOperation``'s
/// write transaction.
///
/// Depot keeps the body as it arrives, the first megabyte in memory and the
/// rest in a temporary file that has no name (removed as soon as it is made,
/// so nothing of it outlives the process, even a crash), and opens the
/// transaction once the whole body is in and accepted. So the store's writer
/// is free while a slow link delivers, and memory holds at most a megabyte of
/// the body beside what `write` keeps, whatever the body's size.
///
/// For example, in ``StreamingCachingOperation/write(_:of:to:)``:
///
/// ```swift
/// var bytes = 0
/// while let chunk = try body.next() { bytes += chunk.count }
/// ```
public final class StreamedBody: Sendable {
    private struct Reader: ~Copyable {
        var memory: [Data]
        var nextInMemory = 0
        var file: FileHandle?
        let fileBytes: Int64
        var fileRead: Int64 = 0
    }

    /// How much of the kept file one ``next()`` reads.
    static let fileChunkBytes = 64 << 10

    private let reader: Mutex<Reader>

    fileprivate init(memory: [Data], file: FileHandle?, fileBytes: Int64) {
        reader = Mutex(Reader(memory: memory, file: file, fileBytes: fileBytes))
    }

    /// The next chunk, in order, or `nil` after the last one. Call it from
    /// `write`, on the store's writer.
    ///
    /// - Throws: ``DepotError/Code/storage`` if the kept part of the body
    ///   cannot be read back: let it propagate, and the transaction rolls back.
    public func next() throws(DepotError) -> Data? {
        try reader.withLock { reader throws(DepotError) -> Data? in
            if reader.nextInMemory < reader.memory.count {
                defer {
                    reader.memory[reader.nextInMemory] = Data()
                    reader.nextInMemory += 1
                }
                return reader.memory[reader.nextInMemory]
            }
            guard let file = reader.file, reader.fileRead < reader.fileBytes else { return nil }
            let chunk: Data?
            do {
                chunk = try file.read(upToCount: Self.fileChunkBytes)
            } catch {
                throw DepotError(.storage, detail: "the body kept for the write cannot be read back", underlying: error)
            }
            guard let chunk, !chunk.isEmpty else {
                throw DepotError(.storage, detail: "the body kept for the write ended \(reader.fileBytes - reader.fileRead) bytes early")
            }
            reader.fileRead += Int64(chunk.count)
            if reader.fileRead >= reader.fileBytes {
                try? file.close()
                reader.file = nil
            }
            return chunk
        }
    }
}

/// Where a streamed body waits for its write: in memory up to a limit, then
/// in a file that has no name. The transfer appends; once the body is
/// complete, ``finish()`` hands it over as a ``StreamedBody``.
final class BodySpool: Sendable {
    /// How much of a body stays in memory by default; the rest goes to a file.
    static let defaultMemoryLimit = 1 << 20

    private struct State: ~Copyable {
        var memory: [Data] = []
        var memoryBytes = 0
        var file: FileHandle?
        var fileBytes: Int64 = 0
        /// Finished or discarded: later chunks are dropped.
        var ended = false
    }

    private let state = Mutex(State())
    private let memoryLimit: Int
    private let folder: URL

    init(memoryLimit: Int = BodySpool.defaultMemoryLimit, folder: URL = FileManager.default.temporaryDirectory) {
        self.memoryLimit = max(0, memoryLimit)
        self.folder = folder
    }

    /// Keeps the next chunk of the body.
    ///
    /// - Throws: ``DepotError/Code/storage`` when the file cannot be made or written.
    func append(_ chunk: Data) throws(DepotError) {
        try state.withLock { state throws(DepotError) in
            guard !state.ended, !chunk.isEmpty else { return }
            if state.file == nil, state.memoryBytes + chunk.count <= memoryLimit {
                state.memory.append(chunk)
                state.memoryBytes += chunk.count
                return
            }
            do {
                let file = try state.file ?? makeFile()
                state.file = file
                try file.write(contentsOf: chunk)
                state.fileBytes += Int64(chunk.count)
            } catch {
                throw DepotError(.storage, detail: "the body cannot be kept for the write in \(folder.path)", underlying: error)
            }
        }
    }

    /// A new file in `folder`, readable and writable by this user alone, and
    /// already removed: it lives as long as its handle.
    private func makeFile() throws -> FileHandle {
        let url = folder.appending(path: "depot-body-\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
        }
        defer { try? FileManager.default.removeItem(at: url) }
        return try FileHandle(forUpdating: url)
    }

    /// The whole body, for the write; the spool keeps nothing after.
    ///
    /// - Throws: ``DepotError/Code/storage`` when the file cannot be rewound.
    func finish() throws(DepotError) -> StreamedBody {
        try state.withLock { state throws(DepotError) -> StreamedBody in
            state.ended = true
            let memory = state.memory
            let file = state.file
            state.memory = []
            state.file = nil
            do {
                try file?.seek(toOffset: 0)
            } catch {
                throw DepotError(.storage, detail: "the body kept for the write cannot be read back", underlying: error)
            }
            return StreamedBody(memory: memory, file: file, fileBytes: state.fileBytes)
        }
    }

    /// How many bytes went to the file so far.
    var bytesInFile: Int64 { state.withLock { $0.fileBytes } }

    /// Drops what was kept, and every later chunk.
    func discard() {
        let file = state.withLock { state -> FileHandle? in
            state.ended = true
            state.memory = []
            defer { state.file = nil }
            return state.file
        }
        try? file?.close()
    }
}
