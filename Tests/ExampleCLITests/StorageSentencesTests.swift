#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CLITestSupport
import Foundation
import GRDB
import Testing

/// Each example app, run as a user runs it, against each storage problem
/// made real: a full disk (a small tmpfs, filled), a read-only cache, a
/// cache a newer version wrote, a cache another process holds locked, one
/// the user may not open, and a damaged one. Each says plain sentences with
/// what to do, and shows nothing technical. A damaged cache is rebuilt and
/// the command goes on; a read-only one is shown and the change refused;
/// the others end the command with status 1.
@Suite(.timeLimit(.minutes(5)))
struct StorageSentencesTests {
    enum Problem: String, CaseIterable, Sendable {
        case diskFull, readOnly, newerSchema, locked, noPermission, damaged
    }

    /// One app: how to make a cache with its schema, and the command that
    /// meets the problem (a sync for nerdfeed, a write for timeline and senbei).
    struct App: Sendable, CustomStringConvertible {
        var name: String
        var seed: [String]
        var command: [String]
        /// What the command loses on a full disk, in the sentence.
        var diskFull: String
        /// What the command says when its write meets a read-only cache (at `{cache}`).
        var readOnly: String
        /// The table and column a newer version renames, which the command writes.
        var renamed: (table: String, column: String)
        /// What the command says when its write meets that newer schema (at `{cache}`).
        var newerSchema: String
        /// The tmpfs room left for the command: enough to open the cache
        /// (GRDB writes once at open, and SQLite maps 32 KB of `-shm`), not
        /// enough for the sync or the change. Found by trying; the windows
        /// are 16 KB wide or more.
        var roomLeft: Int
        var description: String { name }
    }

    static let apps = [
        App(name: "nerdfeed", seed: ["--once", "--offline"], command: ["--once", "--port", "0"],
            diskFull: "-- sync failed: the disk is full, so the new items were not saved; free some space and try again",
            readOnly: "-- sync failed: the cache file is read-only, so the new items were not saved; make it and its folder writable, or choose another file with --cache",
            renamed: ("feedItem", "title"),
            newerSchema: "nerdfeed: The cache file {cache} was written by a newer version of nerdfeed, so the cache could not be read. Update nerdfeed, or choose another file with --cache.",
            roomLeft: 64 * 1_024),
        App(name: "timeline", seed: ["--once", "--link", "offline"], command: ["--post", "hello"],
            diskFull: "timeline: The disk is full, so your post was not saved. Free some space and try again.",
            readOnly: "timeline: The cache file {cache} is read-only, so your post was not saved. Make it and its folder writable, or choose another file with --cache.",
            renamed: ("pendingPost", "text"),
            newerSchema: "timeline: The cache file {cache} was written by a newer version of timeline, so your post was not saved. Update timeline, or choose another file with --cache.",
            roomLeft: 52 * 1_024),
        App(name: "senbei", seed: ["outbox"], command: ["new-task", "Call Ann"],
            diskFull: "senbei: The disk is full, so the task was not saved. Free some space and try again.",
            readOnly: "senbei: The cache file is read-only, so the task was not saved. Make it and its folder writable, or choose another file with --cache.",
            renamed: ("task", "name"),
            newerSchema: "senbei: The cache file was written by a newer version of senbei, so the task was not saved. Update senbei, or choose another file with --cache.",
            roomLeft: 60 * 1_024),
    ]

    static var rows: [(App, Problem)] { apps.flatMap { app in Problem.allCases.map { (app, $0) } } }

    /// The lines `app` says for `problem` with its cache at `cache`, and its exit status.
    static func sentences(_ app: App, _ problem: Problem, cache: String) -> (lines: [String], status: Int32) {
        let name = app.name
        return switch problem {
        case .diskFull:
            ([app.diskFull], 1)
        case .readOnly:
            // It shows what the cache holds, and says why the change is lost.
            (["\(name): The cache file \(cache) is read-only, so \(name) shows what it holds but cannot save changes. Make it and its folder writable to save them.",
              app.readOnly.replacingOccurrences(of: "{cache}", with: cache)], 1)
        case .newerSchema:
            // It opens the cache; the write the newer tables refuse says why.
            ([app.newerSchema.replacingOccurrences(of: "{cache}", with: cache)], 1)
        case .locked:
            (["\(name): Another program kept the cache locked for too long, so \(name) could not open its cache. Close the program that uses it, or wait for it to finish, and try again."], 1)
        case .noPermission:
            (["\(name): You have no permission to use the cache file \(cache), so \(name) could not open its cache. Give your user read and write access to it and its folder, or choose another file with --cache."], 1)
        case .damaged:
            // Rebuilt: said once, and the command goes on.
            (["\(name): The cache file was damaged and has been rebuilt; the damaged file is at \(cache).damaged-"], 0)
        }
    }

    @Test(arguments: rows)
    func oneSentenceWithWhatToDo(_ app: App, _ problem: Problem) async throws {
        let folder = try Executables.temporaryFolder("storage-sentences-\(app.name)-\(problem)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let seed = folder.appending(path: "seed.sqlite").path
        let made = try await Executables.run(app.name, app.seed + ["--cache", seed])
        try #require(made.status == 0, "\(app.name) could not make its cache: \(made.error)")
        // The app may leave its last commits in the -wal file: into the main file with them.
        let seeded = try DatabaseQueue(path: seed)
        _ = try await seeded.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        try seeded.close()
        let place = folder.appending(path: "place", directoryHint: .isDirectory)
        try FileManager.default.createDirectory(at: place, withIntermediateDirectories: true)
        let cache = place.appending(path: "cache.sqlite").path
        let executable = try #require(Executables.url(app.name)).path
        let arguments = app.command + ["--cache", cache]

        let run: ChildResult
        switch problem {
        case .diskFull:
            run = try await Self.onAFullDisk(place.path, seed: seed, roomLeft: app.roomLeft, executable, arguments)
        case .readOnly:
            try FileManager.default.copyItem(atPath: seed, toPath: cache)
            try FileManager.default.setAttributes([.posixPermissions: 0o444], ofItemAtPath: cache)
            run = try await Self.asAnotherUser(owning: place.path, folderMode: 0o555, executable, arguments)
        case .noPermission:
            try FileManager.default.copyItem(atPath: seed, toPath: cache)
            try FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: cache)
            run = try await Self.asAnotherUser(owning: place.path, folderMode: 0o755, executable, arguments)
        case .newerSchema:
            try FileManager.default.copyItem(atPath: seed, toPath: cache)
            let queue = try DatabaseQueue(path: cache)
            // A newer version renamed a column this one writes.
            try await queue.write { db in
                try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('from-a-newer-version')")
                try db.execute(sql: "ALTER TABLE \(app.renamed.table.quotedDatabaseIdentifier) RENAME COLUMN \(app.renamed.column.quotedDatabaseIdentifier) TO renamedByANewerVersion")
            }
            try queue.close()
            run = try await spawn(executable, arguments)
        case .damaged:
            try FileManager.default.copyItem(atPath: seed, toPath: cache)
            let file = try #require(FileHandle(forUpdatingAtPath: cache))
            try file.write(contentsOf: Data(repeating: 0x41, count: 100))
            try file.close()
            run = try await spawn(executable, arguments)
        case .locked:
            try FileManager.default.copyItem(atPath: seed, toPath: cache)
            // Another process, as far as the child can tell, holds the write lock.
            var configuration = Configuration()
            configuration.allowsUnsafeTransactions = true
            let holder = try DatabaseQueue(path: cache, configuration: configuration)
            try await holder.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            run = try await spawn(executable, arguments, environment: ["DEPOT_BUSY_TIMEOUT": "0.2"])
            try await holder.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
            try holder.close()
        }

        let terminal = run.output + run.error
        let expected = Self.sentences(app, problem, cache: cache)
        #expect(run.status == expected.status, "\(app.name), \(problem): status \(run.status)\n\(terminal)")
        let lines = terminal.split(separator: "\n").map(String.init)
        for line in expected.lines {
            // The damaged file's name ends with the time of the rebuild.
            let said = problem == .damaged ? lines.contains { $0.hasPrefix(line) } : lines.contains(line)
            #expect(said, "\(app.name), \(problem): expected\n\(line)\ngot\n\(terminal)")
        }
        for technical in ["SQLite", "request failed", "Error:", "DepotError", "DatabaseError"] {
            #expect(!terminal.contains(technical), "\(app.name), \(problem) shows \(technical):\n\(terminal)")
        }
        // No Swift type name (FetchForumFeed, CreatePost): no CamelCase word.
        #expect(terminal.firstMatch(of: /\b[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+\b/) == nil, "\(app.name), \(problem) names a type:\n\(terminal)")
    }

    /// Runs `executable` with its cache on a 2 MB tmpfs of its own (a mount
    /// namespace: nothing shows outside), filled but for `roomLeft` bytes.
    /// As root with `unshare -m`; otherwise in a user namespace (`unshare -rm`).
    static func onAFullDisk(_ folder: String, seed: String, roomLeft: Int, _ executable: String, _ arguments: [String]) async throws -> ChildResult {
        let script = """
            set -e
            folder=$1 seed=$2 left=$3
            shift 3
            mount -t tmpfs -o size=2m tmpfs "$folder"
            cp "$seed" "$folder/cache.sqlite"
            free=$(( $(stat -f -c '%a * %S' "$folder") ))
            fallocate -l $(( free - left )) "$folder/filler"
            set +e
            "$@"
            """
        let namespace = getuid() == 0 ? ["-m"] : ["-r", "-m"]
        return try await spawn("/usr/bin/unshare", namespace + ["/bin/sh", "-c", script, "sh", folder, seed, "\(roomLeft)", executable] + arguments)
    }

    /// The user the permission rows run as when the tests run as root, who may open any file.
    static let nobody: (uid: uid_t, gid: gid_t) = (65_534, 65_534)

    /// Runs `executable` as a user that the files' modes apply to: this one,
    /// or, as root (whom modes do not stop), `nobody` through `setpriv`,
    /// with the folder and its files given to it.
    static func asAnotherUser(owning folder: String, folderMode: Int, _ executable: String, _ arguments: [String]) async throws -> ChildResult {
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder) }
        guard getuid() == 0 else {
            try FileManager.default.setAttributes([.posixPermissions: folderMode], ofItemAtPath: folder)
            return try await spawn(executable, arguments)
        }
        for file in try FileManager.default.contentsOfDirectory(atPath: folder) + [""] {
            let path = file.isEmpty ? folder : "\(folder)/\(file)"
            #expect(chown(path, nobody.uid, nobody.gid) == 0, "chown \(path): \(String(cString: strerror(errno)))")
        }
        // The folders above must let it through.
        var above = URL(fileURLWithPath: folder).deletingLastPathComponent()
        while above.path != "/" && above.path != FileManager.default.temporaryDirectory.path {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: above.path)
            above = above.deletingLastPathComponent()
        }
        try FileManager.default.setAttributes([.posixPermissions: folderMode], ofItemAtPath: folder)
        return try await spawn("/usr/bin/setpriv", ["--reuid=\(nobody.uid)", "--regid=\(nobody.gid)", "--clear-groups", executable] + arguments)
    }
}
