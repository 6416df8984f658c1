import ArgumentParser
import Depot
import DepotStore
import Foundation
import GRDB
import SyncStatusText

extension ExampleSupport {
    /// The environment variable that sets how many seconds (fractions too)
    /// the apps wait for another process's lock on their cache before they
    /// give up and say so: `DEPOT_BUSY_TIMEOUT=0.5 nerdfeed --once`. Without
    /// it they wait ``/DepotStore/Store/defaultBusyTimeout``. Tests use it to
    /// meet a held lock in a moment.
    public static let busyTimeoutVariable = "DEPOT_BUSY_TIMEOUT"

    /// The busy timeout ``busyTimeoutVariable`` sets, or `nil` when it sets
    /// none (or nothing that reads as a number of seconds from 0 to 3600).
    public static func busyTimeout(in environment: [String: String] = ProcessInfo.processInfo.environment) -> TimeInterval? {
        guard let text = environment[busyTimeoutVariable], let seconds = TimeInterval(text), seconds.isFinite, (0...3_600).contains(seconds) else { return nil }
        return seconds
    }

    /// Opens the app's cache (``cacheFile(app:path:)``) with the busy
    /// timeout of ``busyTimeoutVariable``, and tells the user, once, on
    /// standard error, if it was damaged and rebuilt, or if it opened
    /// read-only.
    ///
    /// - Parameters:
    ///   - precious: The app's rows a rebuild keeps besides its outbox and
    ///     the rows retention protects (Timeline's pending posts, say).
    /// - Throws: A `DepotError` (`.storage`) that says why it could not,
    ///   with its ``/DepotStore/DepotError/storageProblem``.
    public static func openCache(
        app: String, path: String?, migrator: DatabaseMigrator, retention: Retention? = nil, keeping precious: [PreciousRows] = []
    ) throws(DepotError) -> Store {
        let file: URL
        do {
            file = try cacheFile(app: app, path: path)
        } catch {
            throw DepotError(.storage, detail: "cannot make the cache's folder", underlying: error)
        }
        var configuration = GRDB.Configuration()
        if let seconds = busyTimeout() { configuration.busyMode = .timeout(seconds) }
        let store = try Store(
            path: file.path, migrator: migrator, configuration: configuration, retention: retention,
            onCorruption: .rebuild(keeping: precious))
        if let recovery = store.lastRecovery {
            write(["\(app): \(recovery)"], to: .standardError)
        }
        if store.isReadOnly {
            write(["\(app): \(PlainFailure.readOnlyCache(app: app, cacheFile: file.path))"], to: .standardError)
        }
        return store
    }

    /// Tells `error` on standard error as `app: <what happened>. <What to do>.`
    /// (``/SyncStatusText/PlainFailure``), and returns exit status 1 to throw.
    /// Nothing else reaches the user: no operation name, no SQLite message.
    ///
    /// - Parameters:
    ///   - error: The failure. An error that is no `DepotError` is told as its description.
    ///   - app: The app's name.
    ///   - activity: What the app was doing with its cache.
    ///   - cacheFile: The cache's path, named where it helps.
    public static func tell(_ error: any Error, app: String, while activity: CacheActivity, cacheFile: String? = nil) -> ExitCode {
        let sentence: String
        if let error = error as? DepotError {
            sentence = error.plainFailure(app: app, while: activity, cacheFile: cacheFile).description
        } else {
            sentence = String(describing: error)
        }
        write(["\(app): \(sentence)"], to: .standardError)
        return ExitCode.failure
    }
}
