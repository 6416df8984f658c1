import Depot
import Foundation
import GRDB

/// Recognizing a damaged database file, and getting what can be read out of it.
enum StoreDamage {
    /// Whether `error` says the file is damaged: its
    /// ``Depot/DepotError/storageProblem`` would be `.damaged` (SQLite's
    /// `SQLITE_CORRUPT`, `SQLITE_NOTADB`, or "unsupported file format"),
    /// including inside a `DepotError`.
    static func isDamage(_ error: any Error) -> Bool {
        DepotError.StorageProblem(causedBy: error, depth: 0) == .damaged
    }

    /// Whether `error` is an I/O error: the file may be damaged, which a
    /// `integrity_check` tells.
    static func isIOError(_ error: any Error) -> Bool {
        if let error = error as? DepotError, let underlying = error.underlying { return isIOError(underlying) }
        return (error as? DatabaseError)?.resultCode == .SQLITE_IOERR
    }

    // MARK: - The header

    /// SQLite's header: the first 100 bytes of the file.
    private static let headerLength = 100
    private static let magic = Array("SQLite format 3\0".utf8)

    /// Throws `SQLITE_CORRUPT` if the file is shorter than its header says: a
    /// file cut short, which SQLite itself notices only when a read reaches
    /// the missing pages. Checked only without a write-ahead log, whose
    /// frames may hold the pages the file lacks.
    static func checkLength(of path: String) throws {
        guard FileStatus(path + "-wal")?.size ?? 0 == 0, let file = FileHandle(forReadingAtPath: path) else { return }
        defer { try? file.close() }
        guard let header = try? file.read(upToCount: headerLength).map(Array.init), !header.isEmpty else { return }
        guard header.count == headerLength, Array(header[0..<16]) == magic else {
            throw DatabaseError(resultCode: .SQLITE_NOTADB, message: "the file does not start with SQLite's header")
        }
        let pageSize = Int(header[16]) << 8 | Int(header[17])
        let bytesPerPage = pageSize == 1 ? 65_536 : pageSize
        // The page count is valid only when the change counter's copy matches.
        guard header[24..<28] == header[92..<96] else { return }
        let pages = header[28..<32].reduce(0) { $0 << 8 | Int($1) }
        let length = Int((try? file.seekToEnd()) ?? 0)
        if pages * bytesPerPage > length {
            throw DatabaseError(
                resultCode: .SQLITE_CORRUPT,
                message: "the file is \(length) bytes long; its header says \(pages * bytesPerPage)")
        }
    }

    // MARK: - Moving aside

    /// Renames the damaged file, and its `-wal` and `-shm`, to
    /// `<path>.damaged-<date>` (with `-2`, `-3`… if taken).
    ///
    /// - Returns: The new name of the file, or `nil` if it could not be moved.
    static func moveAside(_ path: String, date: Date) -> String? {
        let fileManager = FileManager.default
        let target = asideName(for: path, date: date)
        guard (try? fileManager.moveItem(atPath: path, toPath: target)) != nil else { return nil }
        for companion in ["-wal", "-shm"] where fileManager.fileExists(atPath: path + companion) {
            try? fileManager.moveItem(atPath: path + companion, toPath: target + companion)
        }
        return target
    }

    /// Copies the damaged file and its `-wal` to `<path>.damaged-<date>`,
    /// for a file that stays open (a rebuild in place). Call it while no
    /// connection writes.
    ///
    /// - Returns: The name of the copy, or `nil` if it could not be made.
    static func copyAside(_ path: String, date: Date) -> String? {
        let fileManager = FileManager.default
        let target = asideName(for: path, date: date)
        guard (try? fileManager.copyItem(atPath: path, toPath: target)) != nil else { return nil }
        if fileManager.fileExists(atPath: path + "-wal") {
            try? fileManager.copyItem(atPath: path + "-wal", toPath: target + "-wal")
        }
        return target
    }

    /// `<path>.damaged-<date>`, with `-2`, `-3`… if a file has that name.
    private static func asideName(for path: String, date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let base = path + ".damaged-" + formatter.string(from: date)
        var target = base
        var suffix = 2
        while FileManager.default.fileExists(atPath: target) {
            target = base + "-\(suffix)"
            suffix += 1
        }
        return target
    }

    /// Reads `targets` out of a scratch copy of the damaged file (and its
    /// `-wal`), leaving the kept file as it was. A header that is not
    /// SQLite's is rewritten in the copy, so that the pages behind it can
    /// still be read.
    static func salvage(_ targets: [PreciousRows], fromCopyOf damaged: String) -> Salvage {
        let fileManager = FileManager.default
        let scratch = fileManager.temporaryDirectory.appending(path: "depot-salvage-\(UUID().uuidString)")
        defer { try? fileManager.removeItem(at: scratch) }
        let copy = scratch.appending(path: "damaged.sqlite").path
        do {
            try fileManager.createDirectory(at: scratch, withIntermediateDirectories: true)
            try fileManager.copyItem(atPath: damaged, toPath: copy)
            if fileManager.fileExists(atPath: damaged + "-wal") {
                try fileManager.copyItem(atPath: damaged + "-wal", toPath: copy + "-wal")
            }
        } catch {
            return Salvage(unreadable: targets)
        }
        for pageSize in [nil] + [4096, 1024, 2048, 8192, 16_384, 32_768, 65_536] {
            if let pageSize, !rewriteHeader(of: copy, pageSize: pageSize) { break }
            guard let queue = try? DatabaseQueue(path: copy),
                  let salvage = try? queue.inDatabase({ db -> Salvage in
                      // A schema that cannot be read means this header is wrong.
                      _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master")
                      return Salvage.read(targets, from: db)
                  })
            else { continue }
            try? queue.close()
            return salvage
        }
        return Salvage(unreadable: targets)
    }

    /// Writes a plain SQLite header over the first 100 bytes of `path`,
    /// with `pageSize`, in rollback-journal mode: the schema's page follows
    /// the header, so the rest of the file becomes readable again if only
    /// the header was damaged.
    private static func rewriteHeader(of path: String, pageSize: Int) -> Bool {
        guard let file = FileHandle(forUpdatingAtPath: path) else { return false }
        defer { try? file.close() }
        var header = [UInt8](repeating: 0, count: headerLength)
        header.replaceSubrange(0..<16, with: magic)
        header[16] = pageSize == 65_536 ? 0 : UInt8(pageSize >> 8)
        header[17] = pageSize == 65_536 ? 1 : UInt8(pageSize & 0xFF)
        header[18] = 1 // write version: legacy (no WAL)
        header[19] = 1 // read version
        header[21] = 64 // payload fractions, fixed by the format
        header[22] = 32
        header[23] = 32
        header[24 + 3] = 1 // change counter, differing from version-valid-for: size from the file
        header[40 + 3] = 1 // schema cookie
        header[44 + 3] = 4 // schema format
        header[56 + 3] = 1 // UTF-8
        do {
            try file.seek(toOffset: 0)
            try file.write(contentsOf: header)
            return true
        } catch {
            return false
        }
    }
}
