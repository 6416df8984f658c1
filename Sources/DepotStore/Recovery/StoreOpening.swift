#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Depot
import Foundation
import GRDB

/// How a ``Store`` opens its file: read-write and migrated; read-only when
/// the file cannot be written; rebuilt, with what is precious salvaged, when
/// it is damaged.
struct StoreOpening: Sendable {
    var path: String
    var migrator: DatabaseMigrator
    var configuration: GRDB.Configuration
    var retention: Retention?
    var onCorruption: CorruptionPolicy
    var date: @Sendable () -> Date

    /// An open file.
    struct Opened {
        var writer: any DatabaseWriter
        var lock: OpeningLock?
        var isReadOnly = false
        var recovery: StoreRecovery?
        var newerMigrations: [String] = []
    }

    /// What a rebuild salvages.
    var salvageTargets: [PreciousRows] {
        Salvage.targets(precious: onCorruption.precious ?? [], retention: retention)
    }

    func openStore() throws(DepotError) -> Opened {
        do {
            if FileManager.default.fileExists(atPath: path), !Self.isWritable(path) { return try openReadOnly() }
            return try openReadWrite()
        } catch let error where StoreDamage.isDamage(error) {
            guard onCorruption.precious != nil else {
                throw DepotError.storage(error, detail: "the store at \(path) is damaged")
            }
            return try rebuild(after: error)
        } catch let error where Self.isNotWritable(error) && FileManager.default.isReadableFile(atPath: path) {
            do {
                return try openReadOnly()
            } catch {
                throw DepotError.opening(error, path: path)
            }
        } catch {
            throw DepotError.opening(error, path: path)
        }
    }

    // MARK: - Read-write

    func openReadWrite() throws -> Opened {
        let created = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard created >= 0 else {
            throw DepotError(.storage, detail: "cannot create the database file at \(path) (\(String(cString: strerror(errno))))")
        }
        // Made in place (not written aside and renamed), so that every
        // process's opening lock below is on the same file.
        _ = close(created)
        for file in [path, path + "-wal", path + "-shm"] {
            Self.restrictPermissions(of: file)
        }
        try StoreDamage.checkLength(of: path)
        var configuration = configuration
        if case .immediateError = configuration.busyMode {
            configuration.busyMode = .timeout(Store.defaultBusyTimeout)
        }
        // Another process may be opening the same file: SQLite answers
        // "database is locked" to a second `journal_mode = WAL` at once,
        // without waiting. The open and the migration take turns instead.
        let lock = OpeningLock(path: path)
        let (pool, newer) = try lock.exclusively {
            let pool = try DatabasePool(path: path, configuration: configuration)
            if retention?.sizeBudget != nil { try Store.enableIncrementalVacuum(pool) }
            return (pool, try Store.prepare(pool, migrator: migrator))
        }
        return Opened(writer: pool, lock: lock, newerMigrations: newer)
    }

    /// Takes group and other permissions away from `file`, if it exists with them.
    private static func restrictPermissions(of file: String) {
        guard let status = FileStatus(file), status.permissions & 0o077 != 0 else { return }
        _ = chmod(file, status.permissions & 0o700)
    }

    // MARK: - Read-only

    /// Whether the store can write the existing file at `path`, and make its
    /// `-wal` and `-shm` beside it if they are missing.
    static func isWritable(_ path: String) -> Bool {
        let folder = (path as NSString).deletingLastPathComponent
        guard access(path, W_OK) == 0 else { return false }
        if access(folder.isEmpty ? "." : folder, W_OK) == 0 { return true }
        let companions: [String] = [path + "-wal", path + "-shm"]
        return companions.allSatisfy { access($0, W_OK) == 0 }
    }

    /// Whether `error` says the file or its folder cannot be written.
    static func isNotWritable(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM].contains(error.resultCode)
    }

    /// Opens the file read-only: the app shows what it holds, and writes fail
    /// with `SQLITE_READONLY`. The schema must be current: a read-only file
    /// cannot be migrated.
    func openReadOnly() throws -> Opened {
        var configuration = configuration
        configuration.readonly = true
        if case .immediateError = configuration.busyMode {
            configuration.busyMode = .timeout(Store.defaultBusyTimeout)
        }
        let queue: DatabaseQueue
        do {
            let plain = try DatabaseQueue(path: path, configuration: configuration)
            try plain.read { db in _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") }
            queue = plain
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CANTOPEN || error.resultCode == .SQLITE_READONLY {
            // A file in WAL mode whose `-shm` cannot be made (a read-only
            // folder: `SQLITE_READONLY_DIRECTORY`, or `SQLITE_CANTOPEN`):
            // SQLite reads it as immutable, without the WAL index.
            var components = URLComponents()
            components.scheme = "file"
            components.path = URL(fileURLWithPath: path).path
            components.queryItems = [URLQueryItem(name: "immutable", value: "1")]
            queue = try DatabaseQueue(path: components.string ?? path, configuration: configuration)
        }
        let ready = try queue.read { db in
            try SyncLedger.isCurrent(db) && OutboxTable.isCurrent(db) && PagingTable.exists(db) && db.tableExists(ValueTable.name)
                && migrator.hasCompletedMigrations(db)
        }
        guard ready else {
            throw DepotError(.storage, detail: "the store at \(path) is read-only and needs a migration this app cannot write")
        }
        let newer = try queue.read { db in try Store.unknownMigrations(migrator, db) }
        return Opened(writer: queue, isReadOnly: true, newerMigrations: newer)
    }

    // MARK: - Rebuild

    /// Moves the damaged file aside, salvages what is precious from a copy
    /// of it, opens a fresh file at `path`, and writes the salvage into it.
    func rebuild(after error: any Error) throws(DepotError) -> Opened {
        let cause = DepotError.storage(error, detail: "the store at \(path) is damaged")
        let damagedFile = StoreDamage.moveAside(path, date: date())
        let salvage = damagedFile.map { StoreDamage.salvage(salvageTargets, fromCopyOf: $0) }
            ?? Salvage(unreadable: salvageTargets)
        var opened: Opened
        do {
            opened = try openReadWrite()
        } catch {
            throw DepotError.storage(error, detail: "cannot make a fresh store at \(path) after damage")
        }
        let outcome: (kept: [String: Int], lost: [String: Int], incomplete: [String])
        do {
            outcome = try opened.writer.write { db in salvage.write(into: db) }
        } catch {
            throw DepotError.storage(error, detail: "cannot write what was salvaged into the fresh store at \(path)")
        }
        opened.recovery = StoreRecovery(
            damagedFile: damagedFile, error: cause,
            kept: outcome.kept, lost: outcome.lost, incomplete: outcome.incomplete, date: date())
        return opened
    }
}

/// An advisory lock (`flock`) on the database file that processes opening it
/// take turns with: SQLite answers a second `journal_mode = WAL` with
/// "database is locked" at once, without waiting. SQLite's own locks are
/// `fcntl` locks, which this neither takes nor disturbs, as long as the
/// descriptor stays open: closing any descriptor of a file drops every
/// `fcntl` lock the process holds on it, SQLite's included. So it is closed
/// only when the store goes.
final class OpeningLock: Sendable {
    private let descriptor: Int32

    init(path: String) {
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
    }

    /// Runs `body` while holding the lock (or without it, if the file could
    /// not be opened: SQLite will say why).
    func exclusively<T>(_ body: () throws -> T) throws -> T {
        guard descriptor >= 0 else { return try body() }
        while flock(descriptor, LOCK_EX) != 0, errno == EINTR {}
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    deinit {
        if descriptor >= 0 { _ = close(descriptor) }
    }
}
