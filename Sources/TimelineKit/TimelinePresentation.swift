import Depot
import DepotStore
import Foundation
import SyncStatusText
import TextLayout

/// How the timeline, the network's state and the quit report read as text:
/// the pure part of the `timeline` CLI, shared by its interactive view and `--once`.
public enum TimelinePresentation {
    /// The network line: "link edge · network poor · limit 1 · 1 running, 4 queued · images paused".
    public static func networkLine(link: LinkProfile?, quality: ConnectionQuality, limit: Int, activity: NetworkController.Activity, paused: Set<OperationCategory>) -> String {
        var parts: [String] = []
        if let link { parts.append("link \(link)") }
        parts.append("network \(quality)")
        parts.append("limit \(limit)")
        parts.append("\(activity.running) running, \(activity.queued) queued")
        if !paused.isEmpty { parts.append(paused.map(\.rawValue).sorted().joined(separator: ", ") + " paused") }
        return parts.joined(separator: " · ")
    }

    /// One timeline row: the avatar's state (■ cached, □ not yet), the author
    /// and the text; a post written here shows `◌` and "sending…" until the
    /// server has it, or `✗` and why the server refused it.
    public static func entryLine(_ entry: TimelineEntry, width: Int) -> String {
        guard entry.isPending else {
            return TextLayout.fit("\(entry.hasAvatar ? "■" : "□") @\(entry.author)  \(entry.text)", trailer: "", width: width)
        }
        if let rejection = entry.rejection {
            return TextLayout.fit("✗ @\(entry.author)  \(entry.text)", trailer: "  not sent: \(rejection)", width: width)
        }
        return TextLayout.fit("◌ @\(entry.author)  \(entry.text)", trailer: "  sending…", width: width)
    }

    /// A post's line at quit: "post "hello": sent as #31", "…: queued: will
    /// be sent when online", or "…: not sent — reason".
    public static func sentLine(_ post: TimelineApp.SentPost) -> String {
        let state: String
        switch post.state {
        case .queued: state = "queued: will be sent when online"
        case .sent(let stored): state = "sent as #\(stored.id)"
        case .rejected(let error): state = "not sent — \(rejectionReason(error))"
        }
        return "post \"\(post.text)\": \(state)"
    }

    /// Why the server refused a post, for people: a 422's reason in the
    /// server's words ("text must be 1 to 280 characters"), otherwise what
    /// happened in plain words (no operation name, no codes).
    public static func rejectionReason(_ error: DepotError) -> String {
        if error.status == 422, let excerpt = error.bodyExcerpt { return excerpt }
        return error.plainFailure(app: "timeline", while: .saving("the post")).happened
    }

    /// The whole timeline as printed by `--once`: the network line, the posts, the sync status.
    @MainActor
    public static func list(_ app: TimelineApp, width: Int, now: Date, link: LinkProfile?) -> [String] {
        let estimate = app.controller.connectionSnapshot
        var lines = [networkLine(link: link, quality: estimate.quality, limit: estimate.concurrencyLimit, activity: app.controller.activity, paused: estimate.pausedCategories)]
        let entries = app.entries.fetchedObjects
        lines += entries.map { entryLine($0, width: width) }
        if entries.isEmpty { lines.append("(no posts)") }
        let avatars = entries.filter(\.hasAvatar).count
        lines.append("-- \(app.status.state.summary(now: now, quality: estimate.quality, app: "timeline")) · avatars \(avatars)/\(entries.count)")
        if let paging = pagingLine(app.pages) { lines.append("-- \(paging)") }
        return lines
    }

    /// Where paging stands, when there is something to say: "older posts on
    /// the server", or that the server's pages made no sense (a network
    /// failure is the sync status line's to tell).
    @MainActor
    public static func pagingLine(_ pages: PagedResults<TimelineEntry>) -> String? {
        if let error = pages.pageError, error.code == .invalidPage { return "older posts stopped: \(error.plainFailure(app: "timeline").clause)" }
        guard pages.hasMore, pages.pageCount > 0 else { return nil }
        return "older posts on the server (\(pages.pageCount) \(pages.pageCount == 1 ? "page" : "pages") loaded)"
    }

    /// What quitting did: each post of the session, then the controller's shutdown report.
    @MainActor
    public static func quitLines(_ app: TimelineApp, report: ShutdownReport) -> [String] {
        app.sentPosts.map(sentLine) + [report.description]
    }
}
