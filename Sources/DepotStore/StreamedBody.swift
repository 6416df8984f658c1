#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
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
    /// - Throws: ``/Depot/DepotError/Code/storage`` if the kept part of the body
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
                chunk = try file.read(upToCount: Int(min(Int64(Self.fileChunkBytes), reader.fileBytes - reader.fileRead)))
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
///
/// Chunks are gathered into pieces of ``defaultPieceBytes`` before they are
/// kept, so a body that comes a few bytes at a time costs neither a `Data`
/// per chunk nor a write per chunk.
final class BodySpool: Sendable {
    /// How much of a body stays in memory by default; the rest goes to a file.
    static let defaultMemoryLimit = 1 << 20
    /// How many bytes are gathered before they are kept, by default.
    static let defaultPieceBytes = 64 << 10

    private struct State: ~Copyable {
        /// Chunks not yet kept, fewer than `pieceBytes` of them.
        var gathering = Data()
        var memory: [Data] = []
        var memoryBytes = 0
        var file: FileHandle?
        var fileBytes: Int64 = 0
        /// Finished or discarded: later chunks are dropped.
        var ended = false
        /// Why the body could not be kept: ``BodySpool/finish()`` throws it.
        var failure: DepotError?
    }

    private let state = Mutex(State())
    private let memoryLimit: Int
    private let pieceBytes: Int
    private let folder: URL

    init(memoryLimit: Int = BodySpool.defaultMemoryLimit, pieceBytes: Int = BodySpool.defaultPieceBytes, folder: URL = FileManager.default.temporaryDirectory) {
        self.memoryLimit = max(0, memoryLimit)
        self.pieceBytes = max(1, pieceBytes)
        self.folder = folder
    }

    /// Keeps the next chunk of the body.
    ///
    /// - Throws: ``/Depot/DepotError/Code/storage`` when the file cannot be made or
    ///   written. The body is then lost: ``finish()`` throws the same error.
    func append(_ chunk: Data) throws(DepotError) {
        try state.withLock { state throws(DepotError) in
            guard !state.ended, !chunk.isEmpty else { return }
            state.gathering.append(chunk)
            guard state.gathering.count >= pieceBytes else { return }
            try keepGathered(&state)
        }
    }

    /// Moves the gathered bytes to memory, or to the file once memory is full.
    private func keepGathered(_ state: inout State) throws(DepotError) {
        let piece = state.gathering
        state.gathering = Data()
        guard !piece.isEmpty else { return }
        if state.file == nil, state.memoryBytes + piece.count <= memoryLimit {
            state.memory.append(piece)
            state.memoryBytes += piece.count
            return
        }
        do {
            let file = try state.file ?? makeFile()
            state.file = file
            try file.write(contentsOf: piece)
            state.fileBytes += Int64(piece.count)
        } catch {
            let failure = DepotError(.storage, detail: "the body cannot be kept for the write in \(folder.path)", underlying: error)
            state.failure = failure
            state.ended = true
            state.memory = []
            try? state.file?.close()
            state.file = nil
            throw failure
        }
    }

    /// A new file in `folder`, made readable and writable by this user alone
    /// (`O_EXCL`, mode 0600, not inherited by child processes), and removed at
    /// once: it lives as long as its handle.
    private func makeFile() throws -> FileHandle {
        let path = folder.appending(path: "depot-body-\(UUID().uuidString)").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        unlink(path)
        return FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
    }

    /// The whole body, for the write; the spool keeps nothing after.
    ///
    /// - Throws: ``/Depot/DepotError/Code/storage`` when the body could not be kept,
    ///   or the file cannot be rewound.
    func finish() throws(DepotError) -> StreamedBody {
        try state.withLock { state throws(DepotError) -> StreamedBody in
            if let failure = state.failure { throw failure }
            if !state.ended { try keepGathered(&state) }
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
            state.gathering = Data()
            defer { state.file = nil }
            return state.file
        }
        try? file?.close()
    }
}
