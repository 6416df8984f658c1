import Depot
import DepotStore
import Foundation

// The example apps' English status line. UI text belongs to apps: the library
// gives the facts (SyncStatus.State: syncing, last sync, last error), and each
// app words them for its own screen and language.

extension SyncStatus.State {
    /// One line a person can read: "syncing…", "last synced 2 min ago",
    /// "sync failed: the server failed (status 503); try again
    /// later — showing data from 14:02" (what happened and what to do, in
    /// the words of ``SyncError/plainFailure(app:)``), or "offline — showing cached
    /// data from 14:02", then the network's state when given. A live feed's
    /// status says "live", "catching up (120 changes)" or "connecting…".
    ///
    /// This is the promise of an offline-first app in words: it shows what it
    /// had last and says how old it is.
    ///
    /// For example:
    ///
    /// ```swift
    /// statusLabel.text = status.state.summary(now: Date(), quality: connection.quality)
    /// // "offline — showing cached data from 14:02"
    /// ```
    ///
    /// - Parameters:
    ///   - now: The current time, for "2 min ago".
    ///   - offlineMode: The app was asked not to use the network at all.
    ///   - quality: The connection quality, appended as "network poor".
    ///   - activity: The controller's queue, appended as "2 queued, 1 running" when busy.
    ///   - timeZone: For clock times.
    ///   - app: The app's name, as the user types it, for a failure's words
    ///     ("written by a newer version of nerdfeed").
    public func summary(
        now: Date,
        offlineMode: Bool = false,
        quality: ConnectionQuality? = nil,
        activity: NetworkController.Activity? = nil,
        timeZone: TimeZone = .current,
        app: String = "the app"
    ) -> String {
        let cachedFrom = lastSynced.map { " from \(Self.clockTime($0, timeZone: timeZone))" } ?? ""
        var line: String
        if offlineMode {
            line = lastSynced == nil ? "offline — nothing cached yet" : "offline — showing cached data\(cachedFrom)"
        } else if let live, live != .offline, live != .upToDate, quality != .offline {
            line = live == .connecting ? "connecting…" : "\(live)"
            if skippedEvents > 0 { line += " · \(skippedEvents) event\(skippedEvents == 1 ? "" : "s") skipped" }
        } else if let lastError, lastError.code == .offline || quality == .offline || live == .offline {
            line = lastSynced == nil ? "offline — nothing cached yet" : "offline — showing cached data\(cachedFrom)"
            if isSyncing { line += " (waiting for the network)" }
        } else if isSyncing {
            line = "syncing…"
        } else if let lastError {
            line = "sync failed: \(lastError.plainFailure(app: app).clause)"
            if lastSynced != nil { line += " — showing data\(cachedFrom)" }
        } else if let lastSynced {
            line = "last synced \(Self.relative(lastSynced, now: now))"
        } else {
            line = "not synced yet"
        }
        if let quality, !offlineMode { line += " · network \(quality)" }
        if let activity, !offlineMode, activity.queued + activity.running > 0 {
            line += " · \(activity.queued) queued, \(activity.running) running"
        }
        return line
    }

    /// A short relative time: "just now", "5 min ago", "3 h ago", "2 d ago"; empty for `nil`.
    public static func relative(_ date: Date?, now: Date) -> String {
        guard let date else { return "" }
        let seconds = max(0, now.timeIntervalSince(date))
        switch seconds {
        case ..<45: return "just now"
        case ..<3_600: return "\(max(1, Int(seconds / 60))) min ago"
        case ..<86_400: return "\(Int(seconds / 3_600)) h ago"
        default: return "\(Int(seconds / 86_400)) d ago"
        }
    }

    /// The clock time of `date` ("14:02"), in `timeZone`.
    public static func clockTime(_ date: Date, timeZone: TimeZone = .current) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
    }
}
