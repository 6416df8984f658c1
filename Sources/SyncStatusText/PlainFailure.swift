import Depot
import DepotStore
import Foundation

// The example apps' English for failures. A `DepotError`'s description is for
// logs (operation names, SQLite codes); people are told what happened and
// what to do, in words of their own.

/// A failure told to a person: what happened, then what to do.
///
/// For example:
///
/// ```swift
/// let failure = error.plainFailure(app: "nerdfeed", while: .syncing)
/// print(failure)          // "The disk is full, so the new items were not saved. Free some space and try again."
/// print(failure.clause)   // "the disk is full, so the new items were not saved; free some space and try again"
/// ```
public struct PlainFailure: Sendable, Hashable, CustomStringConvertible {
    /// What happened, lowercase: "the disk is full, so the new items were not saved".
    public var happened: String
    /// What to do, lowercase: "free some space and try again".
    public var remedy: String

    /// Makes a failure from its two halves.
    public init(happened: String, remedy: String) {
        self.happened = happened
        self.remedy = remedy
    }

    /// Both halves as sentences: "The disk is full, so …. Free some space and try again."
    public var description: String {
        "\(Self.capitalized(happened)). \(Self.capitalized(remedy))."
    }

    /// A cache the app can read and not write (a read-only file system, a
    /// file without write permission): "The cache file X is read-only, so
    /// nerdfeed shows what it holds but cannot save changes. Make it and its
    /// folder writable to save them."
    public static func readOnlyCache(app: String, cacheFile: String) -> PlainFailure {
        PlainFailure(
            happened: "the cache file \(cacheFile) is read-only, so \(app) shows what it holds but cannot save changes",
            remedy: "make it and its folder writable to save them")
    }

    /// Both halves in one clause, for a status line: "the disk is full, so …; free some space and try again".
    public var clause: String { "\(happened); \(remedy)" }

    static func capitalized(_ text: String) -> String {
        guard let first = text.first else { return text }
        return first.uppercased() + text.dropFirst()
    }
}

/// What the app was doing with its cache when it failed: what the sentence
/// says was lost.
public struct CacheActivity: Sendable, Hashable {
    let lost: Lost

    enum Lost: Sendable, Hashable {
        case opening
        case syncing
        case reading
        case saving(String)
    }

    /// Opening the cache at launch: "nerdfeed could not open its cache".
    public static let opening = CacheActivity(lost: .opening)
    /// Keeping what a sync brought: "the new items were not saved".
    public static let syncing = CacheActivity(lost: .syncing)
    /// Reading what the cache holds: "the cache could not be read".
    public static let reading = CacheActivity(lost: .reading)

    /// Storing the user's own change: `.saving("your post")` says "your post was not saved".
    public static func saving(_ what: String) -> CacheActivity {
        CacheActivity(lost: .saving(what))
    }

    func consequence(app: String) -> String {
        switch lost {
        case .opening: "\(app) could not open its cache"
        case .syncing: "the new items were not saved"
        case .reading: "the cache could not be read"
        case .saving(let what): "\(what) was not saved"
        }
    }

}

extension DepotError.StorageProblem {
    /// This problem in words, for `app` (its name, as the user types it)
    /// while it was doing `activity`, with its cache at `cacheFile` when known.
    ///
    /// For example, `.diskFull` while syncing: "The disk is full, so the new
    /// items were not saved. Free some space and try again."
    public func plainFailure(app: String, while activity: CacheActivity, cacheFile: String? = nil) -> PlainFailure {
        let lost = activity.consequence(app: app)
        let file = cacheFile.map { "the cache file \($0)" } ?? "the cache file"
        switch self {
        case .diskFull:
            return PlainFailure(happened: "the disk is full, so \(lost)", remedy: "free some space and try again")
        case .readOnly:
            return PlainFailure(happened: "\(file) is read-only, so \(lost)", remedy: "make it and its folder writable, or choose another file with --cache")
        case .newerSchema:
            return PlainFailure(happened: "\(file) was written by a newer version of \(app), so \(lost)", remedy: "update \(app), or choose another file with --cache")
        case .locked:
            return PlainFailure(happened: "another program kept the cache locked for too long, so \(lost)", remedy: "close the program that uses it, or wait for it to finish, and try again")
        case .noPermission:
            return PlainFailure(happened: "you have no permission to use \(file), so \(lost)", remedy: "give your user read and write access to it and its folder, or choose another file with --cache")
        case .damaged:
            return PlainFailure(happened: "\(file) is damaged, so \(lost)", remedy: "remove it, or choose another file with --cache")
        default:
            return PlainFailure(happened: "the cache could not be used, so \(lost)", remedy: "try again, or choose another file with --cache")
        }
    }
}

extension DepotError {
    /// This failure in words for a person: what happened and what to do,
    /// with no operation names, codes or SQLite messages (those stay in
    /// ``Depot/DepotError/description``, for logs).
    ///
    /// For example:
    ///
    /// ```swift
    /// } catch let error as DepotError {
    ///     print("nerdfeed: \(error.plainFailure(app: "nerdfeed", while: .opening, cacheFile: path))")
    ///     // nerdfeed: The disk is full, so nerdfeed could not open its cache. Free some space and try again.
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - app: The app's name, as the user types it.
    ///   - activity: What the app was doing with its cache, for a storage failure.
    ///   - cacheFile: The cache file's path, named where it helps.
    public func plainFailure(app: String, while activity: CacheActivity = .syncing, cacheFile: String? = nil) -> PlainFailure {
        if let problem = storageProblem {
            return problem.plainFailure(app: app, while: activity, cacheFile: cacheFile)
        }
        if code == .dependencyFailed || code == .processing, let cause = underlying as? DepotError {
            return cause.plainFailure(app: app, while: activity, cacheFile: cacheFile)
        }
        if code == .storage {
            return PlainFailure(happened: "the cache could not be used, so \(activity.consequence(app: app))", remedy: "try again, or choose another file with --cache")
        }
        return PlainFailure.network(code: code, status: status)
    }
}

extension SyncError {
    /// This sync failure in words for a person (see
    /// ``Depot/DepotError/plainFailure(app:while:cacheFile:)``), from what the
    /// ledger kept: the code, the status and the storage problem.
    public func plainFailure(app: String) -> PlainFailure {
        if let storageProblem {
            return storageProblem.plainFailure(app: app, while: .syncing)
        }
        if code == .storage {
            return PlainFailure(happened: "the cache could not be used, so the new items were not saved", remedy: "try again, or choose another file with --cache")
        }
        return PlainFailure.network(code: code, status: status)
    }
}

extension PlainFailure {
    /// A failure that is not the cache's, by its code and status.
    static func network(code: DepotError.Code?, status: Int?) -> PlainFailure {
        let answered = status.map { "status \($0)" }
        switch code {
        case .offline?:
            return PlainFailure(happened: "the server cannot be reached", remedy: "check the network and try again")
        case .connectionLost?:
            return PlainFailure(happened: "the connection to the server broke", remedy: "try again")
        case .timedOut?:
            return PlainFailure(happened: "the server did not answer in time", remedy: "try again later")
        case .unauthorized?:
            return PlainFailure(happened: "the server refused the credentials" + (answered.map { " (\($0))" } ?? ""), remedy: "sign in again")
        case .notFound?:
            return PlainFailure(happened: "the server has nothing at that address (status 404)", remedy: "check the address")
        case .server?:
            return PlainFailure(happened: "the server failed" + (answered.map { " (\($0))" } ?? ""), remedy: "try again later")
        case .unexpectedStatus?:
            return PlainFailure(happened: "the server answered " + (answered ?? "in a way that was not expected"), remedy: "try again later")
        case .tooLarge?:
            return PlainFailure(happened: "the server's answer is larger than the app takes", remedy: "check the address")
        case .tooManyRedirects?:
            return PlainFailure(happened: "the server redirected too many times", remedy: "check the address")
        case .insecureRedirect?:
            return PlainFailure(happened: "the server redirected from https to plain http, which is refused", remedy: "check the address")
        case .decoding?:
            return PlainFailure(happened: "the server's answer could not be read", remedy: "check the address, or try again later")
        case .invalidPage?:
            return PlainFailure(happened: "the server's pages made no sense, so paging stopped", remedy: "refresh to start again")
        case .conflict?:
            return PlainFailure(happened: "someone else changed it on the server first", remedy: "look at both versions and choose")
        case .cancelled?, .shutDown?:
            return PlainFailure(happened: "it was cancelled", remedy: "try again")
        case .invalidRequest?, .encoding?:
            return PlainFailure(happened: "the request could not be made", remedy: "check the address and options")
        default:
            return PlainFailure(happened: "the server could not be asked", remedy: "try again later")
        }
    }
}
