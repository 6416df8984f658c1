#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Depot
import Foundation
import GRDB

extension DepotError {
    /// Why the store's file could not be used, in terms an app can word for
    /// a person: the disk is full, the file is read-only, another process
    /// holds it, and so on.
    ///
    /// A struct with static members rather than an enum, like ``Depot/DepotError/Code``:
    /// a new problem can be told apart later without breaking an app's
    /// `switch`, which keeps a `default` for what it does not word yet.
    ///
    /// For example:
    ///
    /// ```swift
    /// } catch let error as DepotError where error.storageProblem == .diskFull {
    ///     banner.text = "The disk is full: free some space and try again."
    /// }
    /// ```
    ///
    /// The technical detail (SQLite's code and statement) stays in the
    /// error's ``Depot/DepotError/underlying`` and description, for logs.
    public struct StorageProblem: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable {
            case diskFull, readOnly, newerSchema, locked, noPermission, damaged
        }

        let base: Base

        /// The disk (or the file's size limit) is full: nothing more could be
        /// written (`SQLITE_FULL`, `ENOSPC`). What was being written was not:
        /// the transaction rolled back whole. It may pass once space is freed.
        public static let diskFull = StorageProblem(base: .diskFull)
        /// The file can be read but not written: its mode, a read-only folder
        /// (where SQLite cannot make its `-wal` and `-shm` files) or a
        /// read-only volume (`SQLITE_READONLY` and its extended codes, `EROFS`).
        public static let readOnly = StorageProblem(base: .readOnly)
        /// The file was migrated by a newer version of the app (it holds
        /// migrations the store's `DatabaseMigrator` does not know,
        /// ``/DepotStore/Store/newerMigrations``), and SQLite refused a read or
        /// write because of its newer tables: a renamed column, a constraint
        /// this version does not fill. What still fits is read and written.
        public static let newerSchema = StorageProblem(base: .newerSchema)
        /// Another connection (usually another process) held the file's lock
        /// for longer than the busy timeout (`SQLITE_BUSY`, `SQLITE_LOCKED`).
        /// It may pass once that process is done.
        public static let locked = StorageProblem(base: .locked)
        /// The process may not open the file or its folder: their permissions
        /// or owner forbid it (`SQLITE_PERM`, `SQLITE_CANTOPEN` where the
        /// file system answers `EACCES`, `EPERM`).
        public static let noPermission = StorageProblem(base: .noPermission)
        /// The file is not a database, or its pages do not hold together
        /// (`SQLITE_CORRUPT`, `SQLITE_NOTADB`): it cannot be read as it is.
        public static let damaged = StorageProblem(base: .damaged)

        /// The problem's stable name ("diskFull"), as the sync ledger keeps it.
        public var rawValue: String { base.rawValue }

        /// The problem with this name, if it is one this version of Depot knows.
        public init?(rawValue: String) {
            guard let base = Base(rawValue: rawValue) else { return nil }
            self.base = base
        }

        init(base: Base) {
            self.base = base
        }

        public var description: String { base.rawValue }
    }

    /// The storage problem behind this error, or `nil` when it is not one
    /// Depot can name (a failure of the network, a constraint the app's own
    /// schema refused, a decoding error).
    ///
    /// It reads the underlying GRDB `DatabaseError`'s result code, through
    /// the errors that wrap it (a ``Depot/DepotError/Code/processing`` error
    /// around a failed write, a dependency's failure). For example:
    ///
    /// ```swift
    /// do {
    ///     try await app.post(text)
    /// } catch {
    ///     switch error.storageProblem {
    ///     case .diskFull?: show("The disk is full: your post was not saved.")
    ///     case .locked?: show("Another program holds the cache: try again.")
    ///     default: show("Your post was not saved.")
    ///     }
    /// }
    /// ```
    public var storageProblem: StorageProblem? {
        StorageProblem(causedBy: underlying, depth: 0)
    }
}

extension DepotError.StorageProblem {
    /// The problem `error` tells, looking through the errors that wrap one
    /// (no deeper than a few: a chain of dependencies ends somewhere).
    init?(causedBy error: (any Error)?, depth: Int) {
        guard let error, depth < 8 else { return nil }
        switch error {
        case let failure as StorageFailure:
            self = failure.problem
        case let database as DatabaseError:
            guard let problem = Self(database) else { return nil }
            self = problem
        case let depot as DepotError:
            guard let problem = Self(causedBy: depot.underlying, depth: depth + 1) else { return nil }
            self = problem
        default:
            let bridged = error as NSError
            guard bridged.domain == NSPOSIXErrorDomain, let problem = Self(errno: Int32(bridged.code)) else {
                guard let inner = bridged.userInfo[NSUnderlyingErrorKey] as? any Error,
                      let problem = Self(causedBy: inner, depth: depth + 1) else { return nil }
                self = problem
                return
            }
            self = problem
        }
    }

    /// The problem SQLite's answer means, by its primary result code.
    init?(_ error: DatabaseError) {
        switch error.resultCode {
        case .SQLITE_FULL: self = .diskFull
        case .SQLITE_READONLY: self = .readOnly
        case .SQLITE_BUSY, .SQLITE_LOCKED: self = .locked
        case .SQLITE_PERM: self = .noPermission
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: self = .damaged
        // A header whose format numbers no SQLite wrote.
        case .SQLITE_ERROR where error.message?.hasPrefix("unsupported file format") == true: self = .damaged
        default: return nil
        }
    }

    /// The problem a file system error number means.
    init?(errno code: Int32) {
        switch code {
        case ENOSPC, EDQUOT: self = .diskFull
        case EROFS: self = .readOnly
        case EACCES, EPERM: self = .noPermission
        default: return nil
        }
    }

    /// What keeps the process from opening the file at `path` for reading and
    /// writing, asked of the file system (SQLite's `SQLITE_CANTOPEN` does not
    /// say): `nil` when the file system sees nothing in the way.
    static func accessProblem(at path: String) -> Self? {
        let folder = (path as NSString).deletingLastPathComponent
        let folderPath = folder.isEmpty ? "." : folder
        if access(folderPath, X_OK) != 0 { return Self(errno: errno) }
        if FileManager.default.fileExists(atPath: path) {
            if access(path, R_OK) != 0 { return Self(errno: errno) }
            // Readable: what cannot be written is read-only to this process.
            if access(path, W_OK) != 0 { return errno == EROFS || errno == EACCES || errno == EPERM ? .readOnly : nil }
            // The -wal and -shm files are made beside it.
            if access(folderPath, W_OK) != 0 { return errno == EROFS || errno == EACCES || errno == EPERM ? .readOnly : nil }
            return nil
        }
        if access(folderPath, W_OK) != 0 { return Self(errno: errno) }
        return nil
    }
}

/// A store failure that SQLite's result code alone does not tell: a file
/// migrated by a newer app, or a file the process may not open. Kept as a
/// ``Depot/DepotError``'s underlying error, with SQLite's own error (when
/// there was one) inside it for logs.
struct StorageFailure: Error, CustomStringConvertible {
    /// What went wrong, for the app to word.
    let problem: DepotError.StorageProblem
    /// What Depot found, for logs.
    let explanation: String
    /// SQLite's error, when it answered one.
    let cause: (any Error)?

    var description: String {
        guard let cause else { return explanation }
        return "\(explanation): \(cause)"
    }

    /// The file holds migrations that `migrator` does not know.
    static func newerSchema(unknownMigrations: [String], cause: (any Error)? = nil) -> StorageFailure {
        StorageFailure(
            problem: .newerSchema,
            explanation: "the file was migrated by a newer version of the app (unknown migrations: \(unknownMigrations.joined(separator: ", ")))",
            cause: cause)
    }
}
